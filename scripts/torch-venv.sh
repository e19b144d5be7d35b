#!/usr/bin/env bash
# Makes (or reuses) a virtual environment of /usr/bin/python3 with PyTorch 2.x from PyPI,
# the second torch every star.torch test runs on (Debian's python3-torch 1.13 is the
# first), and what `pip install training-shim/python` needs to build without fetching
# anything (scikit-build-core, pybind11). Cached under a directory named after the pinned
# versions; prints that directory's python. Does nothing when it is already there.
#   STAR_TOOLS_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/star/tools)
#
# torch's wheel brings its CUDA libraries as nvidia-* wheels (it does not import without
# them): the environment takes about 7 GB. The CUDA build (cu128) matches
# scripts/install-cuda.sh's CUDA 12.8; on a machine without a GPU it runs on the CPU.
set -euo pipefail

TORCH_VERSION=2.9.1
NUMPY_VERSION=2.4.6
PYTEST_VERSION=9.2.0
SKBUILD_VERSION=1.1.2   # scikit-build-core
PYBIND11_VERSION=3.1.0
BASE_PYTHON=/usr/bin/python3

CACHE=${STAR_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/star/tools}
PYVER=$("$BASE_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
PREFIX=$CACHE/torch-$TORCH_VERSION-py$PYVER-numpy-$NUMPY_VERSION-pytest-$PYTEST_VERSION-skbuild-$SKBUILD_VERSION-pybind11-$PYBIND11_VERSION

if [ -f "$PREFIX/.complete" ]; then
  echo "$PREFIX/bin/python"
  exit 0
fi

mkdir -p "$CACHE"
# One installer at a time per cache; a second one waits, then finds the environment.
exec 9>"$CACHE/.torch-venv.lock"
command -v flock >/dev/null 2>&1 && flock 9
if [ -f "$PREFIX/.complete" ]; then
  echo "$PREFIX/bin/python"
  exit 0
fi

PACKAGES=("torch==$TORCH_VERSION" "numpy==$NUMPY_VERSION" "pytest==$PYTEST_VERSION"
          "scikit-build-core==$SKBUILD_VERSION" "pybind11==$PYBIND11_VERSION")
echo "torch-venv: installing ${PACKAGES[*]} into $PREFIX" >&2
# A virtual environment does not survive a move (its scripts name their interpreter's
# path), so it is made in place; the marker is written last, and a half-made one from an
# interrupted run is removed first.
rm -rf "$PREFIX"
trap 'rm -rf "$PREFIX"' EXIT
"$BASE_PYTHON" -m venv "$PREFIX" >&2
"$PREFIX/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile \
  --only-binary=:all: "${PACKAGES[@]}" >&2
"$PREFIX/bin/python" -c "import torch, numpy, pytest, scikit_build_core, pybind11
assert torch.__version__.split('+')[0] == '$TORCH_VERSION', torch.__version__" >&2
printf '%s\n' "${PACKAGES[@]}" >"$PREFIX/.complete"
trap - EXIT
echo "torch-venv: done" >&2
echo "$PREFIX/bin/python"
