#!/usr/bin/env bash
# The simulator at 64, 256 and 1024 workers (sim_bench), and auto's TTA against SSGD and
# ASGD over the cluster-scale scenarios in bench/sim/scale/ (scale.sh).
#   bash bench/sim/run.sh
. "$(dirname "$0")/../lib.sh"
build star sim_bench
"$BUILD/bench/sim_bench" "$@"
bash bench/sim/scale.sh "$BUILD/cli/star"
