#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs the whole test suite.
#   STAR_SANITIZE=1   run the suite under ASan + UBSan (separate build dir)
#   STAR_FUZZ_SECONDS seconds each fuzz target runs after the suite (scripts/fuzz.sh; default
#                     20); STAR_FUZZ=0 skips fuzzing (as STAR_SANITIZE=1 does)
#   extra arguments go to ctest (e.g. -L core, -R Detector)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${STAR_BUILD_DIR:-build}
[ "${STAR_SANITIZE:-0}" = 1 ] && BUILD_DIR=${STAR_BUILD_DIR:-build-asan}

bash scripts/install-deps.sh
# The Kubernetes control plane, helm and the test node for the k8s tests (cached by version).
bash scripts/k8s-tools.sh "$BUILD_DIR/k8s-tools"
# CUDA runtime and NCCL from NVIDIA's PyPI wheels, so that the NCCL backend compiles.
export STAR_CUDA_ROOT=${STAR_CUDA_ROOT:-$(bash scripts/install-cuda.sh)}
# PyTorch 2.x from PyPI beside Debian's 1.13: every star.torch test runs on both, and
# `pip install` of the package is tested on it (cached by version).
export STAR_TORCH2_PYTHON=${STAR_TORCH2_PYTHON:-$(bash scripts/torch-venv.sh)}
# Every CMake build below (the suite's, the fuzz targets', the tests' `pip install`) compiles
# through ccache: a later run on this machine recompiles only what changed. Paths below the
# source tree are hashed relative to it, so another checkout shares the cache.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
fi
bash scripts/build.sh

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
# cpprest's thread pool may still own pplx tasks at exit (scripts/sanitizers/lsan.supp).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/sanitizers/lsan.supp}
# cpprest's stream buffers have their type info in libcpprest.so: UBSan's vptr check
# misreports them (scripts/sanitizers/ubsan.supp).
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$PWD/scripts/sanitizers/ubsan.supp}
(
  cd "$BUILD_DIR"
  ctest --output-on-failure --timeout 600 -j "${STAR_JOBS:-$(nproc)}" "$@" && exit 0
  # A test that failed is run once more, alone: the suite passes only if it then passes,
  # and the log keeps both runs (the first with its crash stack, tests/support/crash_trace.cc)
  # under a FLAKY line naming it, so an intermittent failure is seen, not hidden.
  failed=$(cut -d: -f2 Testing/Temporary/LastTestsFailed.log | tr '\n' ' ')
  echo "=== rerunning the failed tests once: $failed"
  ctest --rerun-failed --output-on-failure --timeout 600
  echo "FLAKY (failed, then passed alone): $failed"
)
# The fuzz targets (their own clang build in build-fuzz); not with the sanitizer suite.
if [ "${STAR_SANITIZE:-0}" != 1 ] && [ "${STAR_FUZZ:-1}" != 0 ]; then
  bash scripts/fuzz.sh
fi
