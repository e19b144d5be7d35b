#!/usr/bin/env bash
# The node agent reconciling a NodeAllocation of 100 pods on the in-memory NodeOs.
#   bash bench/agent/run.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${STAR_BUILD_DIR:-build}
build() { cmake --build "$BUILD" --target "$@" --parallel "${STAR_JOBS:-2}" >&2; }
build agent_apply_bench
"$BUILD/bench/agent_apply_bench" "$@"
