#!/usr/bin/env bash
# A 4-stage pipeline of the bundled trainer (bench/pipeline/job.yaml: an MLP of width 256
# on Fashion-MNIST, 8 micro-batches of 32, 400m CPU per stage, 60 iterations) under
# `star local`: the median iteration time of each stage, per run, with warm-up depths
# plain 1F1B (4,3,2,1) and deeper ones (6,5,2,1; 8,8,2,1), on clean links and with
# worker 1's (stage 1's) link shaped both ways to RATES. As root.
#   bash bench/pipeline/depths.sh [ROUNDS] [RATES]   (default 3, "40mbit 10mbit"; writes bench/pipeline/out/depths/)
. "$(dirname "$0")/../lib.sh"
build star star-fmnist
OUT=bench/pipeline/out/depths
rm -rf "$OUT"; mkdir -p "$OUT"
rates=${2:-40mbit 10mbit}
# One run: the job with STAR_PIPELINE_WARMUP=$2 (and --inject $3 if given) in $OUT/$1.
run() {
  local dir=$OUT/$1 job=$OUT/$1.yaml
  sed "s/                value: \"256\"/&\n              - name: STAR_PIPELINE_WARMUP\n                value: \"$2\"/" \
      bench/pipeline/job.yaml > "$job"
  "$BUILD/cli/star" local "$job" --log-dir "$dir" --quiet ${3:+--inject "$3"} > "$dir.report.json" 2> "$dir.err"
  local link=${3#worker=1,bandwidth=}
  printf '%-7s %-8s %-14s' "${link:-clean}" "$2" "$1"
  for f in "$dir"/worker-*.log; do
    tail -n1 "$f" | /usr/bin/python3 -c 'import json,sys; print(" %.0f" % json.load(sys.stdin)["median_iteration_ms"], end="")'
  done
  echo
}
echo "link    warmup   run            median iteration ms, stages 0 1 2 3"
for n in $(seq 1 "${1:-3}"); do
  for w in 4,3,2,1 6,5,2,1 8,8,2,1; do
    run "clean-${w//,/}-$n" $w ""
    for r in $rates; do run "$r-${w//,/}-$n" $w "worker=1,bandwidth=$r"; done
  done
done | tee "$OUT/summary.txt"
