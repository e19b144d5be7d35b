#!/bin/bash
# Three rounds, each a clean SSGD run and then the whole matrix (neighbor, bandwidth and
# two under ssgd, auto, fixed-k and groups), with the loop as it is on main; nothing else
# on the machine. Run from the repository root after scripts/build.sh.
set -u
BENCH=build/bench/tta_bench
JOB=bench/tta/job-noamp.yaml
OUT=bench/tta/results-matrix-unflagged
for n in 1 2 3; do
  echo "round $n $(date +%T)"
  $BENCH --job $JOB --scenarios clean --policies ssgd --out $OUT/clean/run$n > $OUT/log-clean-$n.txt 2>&1
  $BENCH --job $JOB --scenarios neighbor,bandwidth,two --policies ssgd,auto,fixed-k,groups \
      --out $OUT/run$n > $OUT/log-matrix-$n.txt 2>&1
done
echo "done $(date +%T)"
