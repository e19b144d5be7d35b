#!/usr/bin/env bash
# Detection latency and false alarms of every rule on synthetic traces (deterministic).
#   bash bench/detect-latency/run.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${STAR_BUILD_DIR:-build}
build() { cmake --build "$BUILD" --target "$@" --parallel "${STAR_JOBS:-2}" >&2; }
build detect_latency_bench
"$BUILD/bench/detect_latency_bench" "$@"
