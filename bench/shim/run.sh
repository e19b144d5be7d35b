#!/usr/bin/env bash
# The training shim: all-reduce bus bandwidth against raw Gloo, the per-step overhead of
# the shim against LibTorch's own SGD step (built with LibTorch), the iteration timer.
#   bash bench/shim/run.sh
. "$(dirname "$0")/../lib.sh"
build shim_allreduce_bench shim_report_bench
"$BUILD/bench/shim_allreduce_bench" "$@"
"$BUILD/bench/shim_report_bench" "$@"
if build shim_torch_overhead_bench 2>/dev/null; then "$BUILD/bench/shim_torch_overhead_bench" "$@"; fi
