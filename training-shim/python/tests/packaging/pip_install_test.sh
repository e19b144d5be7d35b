#!/usr/bin/env bash
# `pip install` of the package, as a user runs it, on PYTHON (a torch 2 environment with
# the build backend: scripts/torch-venv.sh): builds star._star with CMake from this
# repository into a directory of its own (--target, so the environment is left as it
# was), then trains one step with what was installed (one_step.py).
#   pip_install_test.sh PYTHON PACKAGE_DIR WORK_DIR
# WORK_DIR is made empty first and removed at the end.
set -euo pipefail
PYTHON=$1 PACKAGE=$2 WORK=$3
rm -rf "$WORK"
mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
# No build isolation: the environment has scikit-build-core and pybind11, and the test
# reaches no package index. The CMake build tree stays in WORK.
start=$(date +%s)
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps \
  --target "$WORK/site" --config-settings=build-dir="$WORK/build" "$PACKAGE"
echo "pip_install_test: pip install took $(( $(date +%s) - start )) s"
# Only what pip installed on the path (ctest's PYTHONPATH points at <build>/python).
PYTHONPATH="$WORK/site" "$PYTHON" "$(dirname "$0")/one_step.py" "$WORK/site"
