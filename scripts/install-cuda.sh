#!/usr/bin/env bash
# Installs the CUDA runtime and NCCL (headers and shared libraries) from NVIDIA's PyPI
# wheels into a cache directory named after their versions, and prints that directory:
# pass it to CMake as -DSTAR_CUDA_ROOT=<dir> (or export STAR_CUDA_ROOT) to build the NCCL
# collective backend on a machine without a CUDA toolkit. STAR has no kernels, but the
# headers need two more wheels: crt/host_config.h is in nvcc's, nv/target in CCCL's.
# Running the backend still needs a GPU and its driver; without one its tests skip.
# Does nothing when the directory is already there.
#   STAR_TOOLS_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/star/tools)
#   STAR_PYTHON        a Python 3 with pip to install with (default: the first python3 on
#                      PATH that has pip, else /usr/bin/python3)
#
# Layout of <dir>: site-packages/nvidia/<package>/ as the wheels unpack them,
# and include/ and lib/ of symlinks into it, as a CUDA toolkit has them (the wheels ship
# libcudart.so.12 and libnccl.so.2 without the unversioned names the linker looks for).
set -euo pipefail

# The runtime and NCCL that PyTorch 2.8 (cu128) ships with; nvcc and CCCL of the same 12.8.
CUDART_VERSION=12.8.90  # nvidia-cuda-runtime-cu12
NVCC_VERSION=12.8.93    # nvidia-cuda-nvcc-cu12: for its include/crt
CCCL_VERSION=12.8.90    # nvidia-cuda-cccl-cu12: for its include/nv
NCCL_VERSION=2.27.3     # nvidia-nccl-cu12

CACHE=${STAR_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/star/tools}
PREFIX=$CACHE/cuda-$CUDART_VERSION-nvcc-$NVCC_VERSION-cccl-$CCCL_VERSION-nccl-$NCCL_VERSION

if [ -f "$PREFIX/.complete" ]; then
  echo "$PREFIX"
  exit 0
fi

PYTHON=${STAR_PYTHON:-}
if [ -z "$PYTHON" ]; then
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -m pip --version >/dev/null 2>&1; then
      PYTHON=$p
      break
    fi
  done
fi
if [ -z "$PYTHON" ]; then
  echo "install-cuda: no python3 with pip (install python3-pip, or set STAR_PYTHON)" >&2
  exit 1
fi

mkdir -p "$CACHE"
# One installer at a time per cache; a second one waits, then finds the directory.
exec 9>"$CACHE/.cuda.lock"
command -v flock >/dev/null 2>&1 && flock 9
if [ -f "$PREFIX/.complete" ]; then
  echo "$PREFIX"
  exit 0
fi

WHEELS=("nvidia-cuda-runtime-cu12==$CUDART_VERSION" "nvidia-cuda-nvcc-cu12==$NVCC_VERSION"
        "nvidia-cuda-cccl-cu12==$CCCL_VERSION" "nvidia-nccl-cu12==$NCCL_VERSION")
echo "install-cuda: installing ${WHEELS[*]} into $PREFIX" >&2
STAGE=$(mktemp -d "$PREFIX.tmp.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
# --target installs outside the interpreter's environment, so Debian's pip accepts it.
"$PYTHON" -m pip install --quiet --root-user-action=ignore --no-deps --only-binary=:all: --no-compile \
  --target "$STAGE/site-packages" "${WHEELS[@]}" >&2

nvidia=site-packages/nvidia
for lib in "$nvidia/cuda_runtime/lib/libcudart.so.12" "$nvidia/nccl/lib/libnccl.so.2" \
           "$nvidia/cuda_nvcc/include/crt/host_config.h" "$nvidia/cuda_cccl/include/nv/target"; do
  if [ ! -f "$STAGE/$lib" ]; then
    echo "install-cuda: the wheels did not install $lib" >&2
    exit 1
  fi
done
mkdir "$STAGE/include" "$STAGE/lib"
# Relative links, so the directory may be moved or mounted elsewhere as a whole.
for pkg in cuda_runtime cuda_nvcc cuda_cccl nccl; do
  for entry in "$STAGE/$nvidia/$pkg/include/"*; do
    case $entry in *.py) continue ;; esac
    ln -s "../$nvidia/$pkg/include/$(basename "$entry")" "$STAGE/include/"
  done
done
ln -s "../$nvidia/cuda_runtime/lib/libcudart.so.12" "$STAGE/lib/libcudart.so.12"
ln -s libcudart.so.12 "$STAGE/lib/libcudart.so"
ln -s "../$nvidia/nccl/lib/libnccl.so.2" "$STAGE/lib/libnccl.so.2"
ln -s libnccl.so.2 "$STAGE/lib/libnccl.so"
printf '%s\n' "${WHEELS[@]}" >"$STAGE/.complete"

chmod 755 "$STAGE"  # mktemp made it private
rm -rf "$PREFIX"
mv "$STAGE" "$PREFIX"
trap - EXIT
echo "install-cuda: done" >&2
echo "$PREFIX"
