#!/usr/bin/env bash
# How steady the detector's state is on the trace families of real clusters (bimodal
# cohorts, persistent slow workers, a late second step, clean heterogeneous cohorts;
# deterministic), then the control loop on a bimodal cohort in `star sim`.
#   bash bench/detect-stability/run.sh
. "$(dirname "$0")/../lib.sh"
build detect_stability_bench star
"$BUILD/bench/detect_stability_bench" "$@"
echo "star sim examples/sim/bimodal.json --policy all (5 of 10 workers 3x slower from the start):"
"$BUILD/cli/star" sim examples/sim/bimodal.json --policy all |
  python3 -c 'import json,sys
for r in json.load(sys.stdin)["results"]:
    print("  {policy:8} tta {tta:8.1f} s  decisions {decisions}".format(tta=r["tta_seconds"] or float("nan"), **r))'
