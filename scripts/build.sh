#!/usr/bin/env bash
# Configures and builds STAR into ${STAR_BUILD_DIR:-build}.
#   STAR_SANITIZE=1   build with AddressSanitizer + UndefinedBehaviorSanitizer
#   STAR_BUILD_TYPE   CMake build type (default RelWithDebInfo)
#   STAR_CUDA_ROOT    CUDA runtime and NCCL (scripts/install-cuda.sh prints one): builds the
#                     NCCL backend
#   STAR_TORCH2_PYTHON a python with PyTorch 2.x (scripts/torch-venv.sh prints one): the
#                     star.torch tests also run on it
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${STAR_BUILD_DIR:-build}
SANITIZE=${STAR_SANITIZE:-0}
[ "$SANITIZE" = 1 ] && BUILD_DIR=${STAR_BUILD_DIR:-build-asan}

GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
# An existing build dir keeps its generator.
[ -f "$BUILD_DIR/CMakeCache.txt" ] && GEN=()

cmake -S . -B "$BUILD_DIR" "${GEN[@]}" \
  -DCMAKE_BUILD_TYPE="${STAR_BUILD_TYPE:-RelWithDebInfo}" \
  -DSTAR_WERROR=ON \
  ${STAR_CUDA_ROOT:+"-DSTAR_CUDA_ROOT=$STAR_CUDA_ROOT" -DSTAR_WITH_CUDA=ON} \
  ${STAR_TORCH2_PYTHON:+"-DSTAR_TORCH2_PYTHON=$STAR_TORCH2_PYTHON"} \
  -DSTAR_SANITIZE="$([ "$SANITIZE" = 1 ] && echo ON || echo OFF)"
cmake --build "$BUILD_DIR" --parallel "${STAR_JOBS:-$(nproc)}"
