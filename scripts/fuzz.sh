#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang into ${STAR_FUZZ_BUILD_DIR:-build-fuzz}
# and runs each for a bounded time (ctest -L fuzz). Any crash, timeout, leak or sanitizer
# report fails; the reproducer is under <build>/tests/fuzz/run/<target>/artifacts/.
#   STAR_FUZZ_SECONDS   seconds per target (default 20)
#   STAR_JOBS           parallel build and test jobs (default: the number of cores)
#   extra arguments go to ctest (e.g. -R manifest)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${STAR_FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_PER_TARGET=${STAR_FUZZ_SECONDS:-20}
JOBS=${STAR_JOBS:-$(nproc)}

GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
[ -f "$BUILD_DIR/CMakeCache.txt" ] && GEN=()  # an existing build dir keeps its generator
LAUNCHER=()
command -v ccache >/dev/null 2>&1 && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

# -O1 with line tables and assertions on: quick to build, and stacks name the lines.
CC=${CC_FUZZ:-clang} CXX=${CXX_FUZZ:-clang++} cmake -S . -B "$BUILD_DIR" "${GEN[@]}" "${LAUNCHER[@]}" \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
  -DSTAR_FUZZ=ON -DSTAR_FUZZ_SECONDS="$SECONDS_PER_TARGET" \
  -DSTAR_BUILD_BENCH=OFF -DSTAR_WITH_TORCH=OFF -DSTAR_WITH_CUDA=OFF
cmake --build "$BUILD_DIR" --target star_fuzzers --parallel "$JOBS"

cd "$BUILD_DIR"
rm -rf tests/fuzz/run  # this run's logs and reproducers only
status=0
ctest -L fuzz --output-on-failure -j "$JOBS" "$@" || status=$?
echo "fuzz: executions per target (${SECONDS_PER_TARGET} s each):"
for log in tests/fuzz/run/*/fuzz.log; do
  [ -f "$log" ] || continue
  name=$(basename "$(dirname "$log")")
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  printf '  %-16s %s\n' "$name" "${execs:-(no final stats: see $BUILD_DIR/$log)}"
done
exit $status
