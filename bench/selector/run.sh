#!/usr/bin/env bash
# The committed learned selector (models/selector.json) against the heuristic in the
# closed loop, on the two held-out sets of 500 scenarios.
#   bash bench/selector/run.sh          (writes bench/selector/out/)
. "$(dirname "$0")/../lib.sh"
build star
mkdir -p bench/selector/out
for seed in 1001 3001; do
  "$BUILD/cli/star" train-selector --evaluate 500 --model models/selector.json --seed $seed \
      --min-workers 16 --max-workers 1024 > bench/selector/out/seed$seed.json
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1], "at least as good", d["ml_at_least_as_good"], "mean gain", round(d["mean_gain"], 4))' bench/selector/out/seed$seed.json
done
