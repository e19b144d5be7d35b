#!/usr/bin/env bash
# The node agent reconciling a NodeAllocation of 100 pods on the in-memory NodeOs.
#   bash bench/agent/run.sh
. "$(dirname "$0")/../lib.sh"
build agent_apply_bench
"$BUILD/bench/agent_apply_bench" "$@"
