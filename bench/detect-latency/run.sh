#!/usr/bin/env bash
# Detection latency and false alarms of every rule on synthetic traces (deterministic).
#   bash bench/detect-latency/run.sh
. "$(dirname "$0")/../lib.sh"
build detect_latency_bench
"$BUILD/bench/detect_latency_bench" "$@"
