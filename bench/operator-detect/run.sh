#!/usr/bin/env bash
# Detection on the operator's path: a neighbor started beside a worker of a real job on the
# local cluster of scripts/cluster.sh, timed to the StragglerDetected Event and to
# status.stragglers. As root (cluster.sh up). Writes bench/operator-detect/out.json.
#   bash bench/operator-detect/run.sh [--runs 5] [--clean-runs 1]
. "$(dirname "$0")/../lib.sh"
build star-operator star-fmnist
[ $# -eq 0 ] && set -- --runs 5 --clean-runs 1
python3 bench/operator-detect/detect_on_operator.py --build "$BUILD" --out bench/operator-detect/out.json "$@"
