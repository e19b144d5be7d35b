#!/usr/bin/env bash
# The progress line's ETA replayed on the accuracy curves of the testbed's last run
# (bench/tta/out/, written by bench/run tta), or on the reports given.
#   bash bench/eta/run.sh [REPORT.json...]
. "$(dirname "$0")/../lib.sh"
build eta_replay_bench
if [ $# -eq 0 ]; then set -- bench/tta/out/run*/runs/*.json; fi
[ -e "$1" ] || { echo "run.sh: no reports: run bench/run tta first" >&2; exit 1; }
"$BUILD/bench/eta_replay_bench" "$@"
