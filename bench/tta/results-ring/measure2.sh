#!/bin/bash
# Three rounds of two and neighbor under fixed-k with the drift hold's fixed_k change too.
set -u
NEW=/work/main/build/bench/tta_bench
JOB=/work/main/bench/tta/job-noamp.yaml
OUT=/work/main/bench/tta/results-ring
for n in 1 2 3; do
  echo "round $n $(date +%T)"
  $NEW --job $JOB --scenarios two,neighbor --policies fixed-k --out $OUT/drift/run$n > $OUT/log-drift-$n.txt 2>&1
done
echo "done $(date +%T)"
