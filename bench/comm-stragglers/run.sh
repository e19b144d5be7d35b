#!/usr/bin/env bash
# Communication stragglers on the testbed (bench/tta/job-noamp.yaml: 4 Fashion-MNIST
# workers at 400m CPU each, target accuracy 0.85): per round a clean SSGD run, then the
# co-located sender (bwneighbor: 800 of worker 2's 1 Gbit/s uplink from 5 s, guarantee
# 100 Mbit/s) and the hard slow link (bandwidth: worker 2's link shaped to 200 Mbit/s both
# ways from 5 s) under ssgd and auto; then the summary with Korel's offset, and star sim
# replaying the runs (bench/calibration/calibrate.py). As root.
#   bash bench/comm-stragglers/run.sh [ROUNDS]     (default 3; writes bench/comm-stragglers/out/)
. "$(dirname "$0")/../lib.sh"
build star star-fmnist tta_bench
JOB=bench/tta/job-noamp.yaml
OUT=bench/comm-stragglers/out
rm -rf "$OUT"; mkdir -p "$OUT"
for n in $(seq 1 "${1:-3}"); do
  echo "round $n $(date +%T)" >&2
  "$BUILD/bench/tta_bench" --job $JOB --scenarios clean --policies ssgd --out $OUT/clean/run$n \
      > $OUT/log-clean-$n.txt 2>&1
  "$BUILD/bench/tta_bench" --job $JOB --scenarios bwneighbor,bandwidth --policies ssgd,auto \
      --out $OUT/run$n > $OUT/log-matrix-$n.txt 2>&1
done
/usr/bin/python3 bench/comm-stragglers/summarize.py "$OUT" | tee "$OUT/summary.txt"
# star sim against these runs: each run's measured link speeds replayed (cut at its
# reallocations), the progress parameters fitted on both scenarios.
/usr/bin/python3 bench/calibration/calibrate.py --star "$BUILD/cli/star" --amp off \
    --clean $OUT/clean/run* --runs $OUT/run* --fit bwneighbor,bandwidth \
    --out "$OUT/calibration" | tee "$OUT/calibration.txt"
