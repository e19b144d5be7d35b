#!/bin/bash
# Five rounds: a clean SSGD run, then two and neighbor under auto with the loop before
# the change (a copy of tta_bench built from the commit before it), then with it.
set -u
NEW=/work/main/build/bench/tta_bench
OLD=${OLD:-/tmp/before/bench/tta_bench}
JOB=/work/main/bench/tta/job-noamp.yaml
OUT=/work/main/bench/tta/results-unflagged
# The trainer is the same in both builds (the change is in the control loop): the copy
# of the old build finds it through a link, /tmp/before/training-shim -> build/training-shim,
# and its neighbor process is that build's star, copied to /tmp/before/cli/star.
for n in 1 2 3 4 5; do
  echo "round $n $(date +%T)"
  $NEW --job $JOB --scenarios clean --policies ssgd --out $OUT/clean/run$n > $OUT/log-clean-$n.txt 2>&1
  $OLD --job $JOB --scenarios two,neighbor --policies auto --out $OUT/before/run$n > $OUT/log-before-$n.txt 2>&1
  $NEW --job $JOB --scenarios two,neighbor --policies auto --out $OUT/after/run$n > $OUT/log-after-$n.txt 2>&1
done
echo "done $(date +%T)"
