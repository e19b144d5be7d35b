#!/bin/bash
# Three rounds: clean SSGD, then two and neighbor under fixed-k with the loop before and
# after the ring change, then two under auto and groups with the change.
set -u
NEW=/work/main/build/bench/tta_bench
# The loop before both changes: a build of commit b6543a3 (git worktree add /tmp/old b6543a3).
OLD=/tmp/old/build/bench/tta_bench
JOB=/work/main/bench/tta/job-noamp.yaml
OUT=/work/main/bench/tta/results-ring
for n in 1 2 3; do
  echo "round $n $(date +%T)"
  $NEW --job $JOB --scenarios clean --policies ssgd --out $OUT/clean/run$n > $OUT/log-clean-$n.txt 2>&1
  $OLD --job $JOB --scenarios two,neighbor --policies fixed-k --out $OUT/before/run$n > $OUT/log-before-$n.txt 2>&1
  $NEW --job $JOB --scenarios two,neighbor --policies fixed-k --out $OUT/after/run$n > $OUT/log-after-$n.txt 2>&1
  $NEW --job $JOB --scenarios two --policies auto,groups --out $OUT/after/run$n > $OUT/log-after-auto-$n.txt 2>&1
done
echo "done $(date +%T)"
