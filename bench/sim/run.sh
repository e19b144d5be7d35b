#!/usr/bin/env bash
# The simulator at 64, 256 and 1024 workers (sim_bench), and auto's TTA against SSGD and
# ASGD over the cluster-scale scenarios in bench/sim/scale/ (scale.sh).
#   bash bench/sim/run.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${STAR_BUILD_DIR:-build}
build() { cmake --build "$BUILD" --target "$@" --parallel "${STAR_JOBS:-2}" >&2; }
build star sim_bench
"$BUILD/bench/sim_bench" "$@"
bash bench/sim/scale.sh "$BUILD/cli/star"
