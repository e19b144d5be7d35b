#!/usr/bin/env bash
# Configures and builds STAR into ${STAR_BUILD_DIR:-build}.
#   STAR_SANITIZE=1   build with AddressSanitizer + UndefinedBehaviorSanitizer
#   STAR_BUILD_TYPE   CMake build type (default RelWithDebInfo)
#   STAR_CUDA_ROOT    CUDA runtime and NCCL (scripts/install-cuda.sh prints one): builds the
#                     NCCL backend
#   STAR_TORCH2_PYTHON a python with PyTorch 2.x (scripts/torch-venv.sh prints one): the
#                     star.torch tests also run on it
# RelWithDebInfo here means -O2 with line tables only (-g1): crash traces and perf still
# get file:line, and the compiler writes far less than with full debug info (-g).
# Compiles go through ccache where it is installed (scripts/install-deps.sh installs it;
# cache in ~/.cache/ccache, shared by every checkout on the machine since paths below the
# source tree are hashed relative to it).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${STAR_BUILD_DIR:-build}
SANITIZE=${STAR_SANITIZE:-0}
[ "$SANITIZE" = 1 ] && BUILD_DIR=${STAR_BUILD_DIR:-build-asan}

GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
# An existing build dir keeps its generator.
[ -f "$BUILD_DIR/CMakeCache.txt" ] && GEN=()

LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  CCACHE="env;CCACHE_BASEDIR=$PWD;CCACHE_NOHASHDIR=1;ccache"
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER="$CCACHE" -DCMAKE_C_COMPILER_LAUNCHER="$CCACHE")
fi

cmake -S . -B "$BUILD_DIR" "${GEN[@]}" "${LAUNCHER[@]}" \
  -DCMAKE_BUILD_TYPE="${STAR_BUILD_TYPE:-RelWithDebInfo}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DSTAR_WERROR=ON \
  ${STAR_CUDA_ROOT:+"-DSTAR_CUDA_ROOT=$STAR_CUDA_ROOT" -DSTAR_WITH_CUDA=ON} \
  ${STAR_TORCH2_PYTHON:+"-DSTAR_TORCH2_PYTHON=$STAR_TORCH2_PYTHON"} \
  -DSTAR_SANITIZE="$([ "$SANITIZE" = 1 ] && echo ON || echo OFF)"
cmake --build "$BUILD_DIR" --parallel "${STAR_JOBS:-$(nproc)}"
