#!/usr/bin/env bash
# The straggler testbed's matrix: three rounds, each a clean SSGD run and then the neighbor,
# bandwidth and two scenarios under ssgd, auto, fixed-k and groups (bench/tta/job-noamp.yaml:
# 4 Fashion-MNIST workers at 400m CPU each, target accuracy 0.85), then the summary that
# bench/tta/results.md records. As root; about 10 minutes a round on 2 cores.
#
#   bash bench/tta/run.sh [ROUNDS]        (default 3; writes bench/tta/out/, not tracked)
#
#   STAR_BUILD_DIR   where tta_bench was built (default: build)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BENCH=${STAR_BUILD_DIR:-build}/bench/tta_bench
[ -x "$BENCH" ] || { echo "run.sh: $BENCH is not built (bench/run builds it)" >&2; exit 1; }
JOB=bench/tta/job-noamp.yaml
OUT=bench/tta/out
rm -rf "$OUT"; mkdir -p "$OUT"
for n in $(seq 1 "${1:-3}"); do
  echo "round $n $(date +%T)" >&2
  "$BENCH" --job $JOB --scenarios clean --policies ssgd --out $OUT/clean/run$n > $OUT/log-clean-$n.txt 2>&1
  "$BENCH" --job $JOB --scenarios neighbor,bandwidth,two --policies ssgd,auto,fixed-k,groups \
      --out $OUT/run$n > $OUT/log-matrix-$n.txt 2>&1
done
/usr/bin/python3 bench/tta/summarize.py "$OUT" | tee "$OUT/summary.txt"
