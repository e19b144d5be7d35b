#!/usr/bin/env bash
# The decision core's microbenchmarks (Google Benchmark): detection per report, mode
# selection, BOA batch planning, reallocation planning. bench/core/results.md records them.
#   bash bench/core/run.sh [GOOGLE BENCHMARK FLAGS...]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${STAR_BUILD_DIR:-build}
build() { cmake --build "$BUILD" --target "$@" --parallel "${STAR_JOBS:-2}" >&2; }
build detect_bench select_bench batch_bench resources_bench
for b in detect_bench select_bench batch_bench resources_bench; do
  "$BUILD/bench/$b" --benchmark_min_time=0.2 "$@"
done
