#!/usr/bin/env bash
# The decision core's microbenchmarks (Google Benchmark): detection per report, mode
# selection, BOA batch planning, reallocation planning, pipeline warm-up choice.
# bench/core/results.md records them.
#   bash bench/core/run.sh [GOOGLE BENCHMARK FLAGS...]
. "$(dirname "$0")/../lib.sh"
build detect_bench select_bench batch_bench resources_bench pipeline_bench
for b in detect_bench select_bench batch_bench resources_bench pipeline_bench; do
  "$BUILD/bench/$b" --benchmark_min_time=0.2 "$@"
done
