#!/usr/bin/env bash
# The committed learned selector (models/selector.json) against the heuristic in the
# closed loop, on the two held-out sets of 500 scenarios.
#   bash bench/selector/run.sh          (writes bench/selector/out/)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${STAR_BUILD_DIR:-build}
build() { cmake --build "$BUILD" --target "$@" --parallel "${STAR_JOBS:-2}" >&2; }
build star
mkdir -p bench/selector/out
for seed in 1001 3001; do
  "$BUILD/cli/star" train-selector --evaluate 500 --model models/selector.json --seed $seed \
      --min-workers 16 --max-workers 1024 > bench/selector/out/seed$seed.json
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1], "at least as good", d["ml_at_least_as_good"], "mean gain", round(d["mean_gain"], 4))' bench/selector/out/seed$seed.json
done
