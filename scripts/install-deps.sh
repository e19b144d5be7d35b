#!/usr/bin/env bash
# Installs every Debian package STAR needs to build, test and run its demo.
# Idempotent and non-interactive: packages already present are left alone, and
# nothing is fetched when everything is installed. Needs root (or sudo) to install.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  ccache  # compiler cache (scripts/build.sh, scripts/fuzz.sh): a second build of the same sources is quick
  nlohmann-json3-dev libcli11-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libglpk-dev
  libgloo-dev libcpprest-dev libssl-dev libboost-dev prometheus-cpp-dev zlib1g-dev
  libtorch-dev dataset-fashion-mnist
  libcgroup-dev libnl-3-dev libnl-route-3-dev iproute2
  libyaml-cpp-dev libyaml-dev gnuplot-nox
  libxgboost-dev  # the learned mode selector (optional: built only where found)
  clang clang-14 libclang-rt-14-dev
  python3-yaml prometheus
  python3-dev python3-torch python3-numpy pybind11-dev python3-pytest  # star.torch and its tests
  python3-venv python3-pip python3-setuptools  # `pip install` of star.torch into a venv (README)
  podman runc mmdebstrap  # the image tests (tests/image); runc: their runtime (podman alone brings crun)
  containerd containernetworking-plugins busybox-static  # the real kubelet's node (scripts/kubelet-node.sh)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: run as root (or install sudo) to install them" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: done"
