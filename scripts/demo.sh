#!/usr/bin/env bash
# The README's first command: installs dependencies, builds `star` and the bundled
# Fashion-MNIST trainer, and runs examples/fmnist-job.yaml with `star local`: 4 worker
# processes, each in its own cgroup (400m CPU) and network namespace, training over Gloo.
# At 5 s a co-located neighbor (3 busy threads) starts beside worker 2; STAR detects the
# straggler, takes CPU back from the neighbor, rebalances batches, reconsiders the sync
# mode and, where the CPU has native bf16, turns on mixed precision for it. Prints the decision timeline and the report; writes demo-report.json
# and demo.png. Needs root (cgroups, namespaces).
#   STAR_DEMO_POLICY=ssgd bash scripts/demo.sh    # the same run without mitigation
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
bash scripts/install-deps.sh
BUILD_DIR=${STAR_BUILD_DIR:-build}
GEN=()
command -v ninja >/dev/null 2>&1 && [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && GEN=(-G Ninja)
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DSTAR_WERROR=ON >/dev/null
cmake --build "$BUILD_DIR" --target star star-fmnist --parallel "$(nproc)"
STAR="$BUILD_DIR/cli/star"

echo
echo "== star local examples/fmnist-job.yaml --inject worker=2,neighbor=3,start=5s"
$SUDO "$STAR" local examples/fmnist-job.yaml \
  --policy "${STAR_DEMO_POLICY:-auto}" \
  --inject worker=2,neighbor=3,start=5s \
  --report demo-report.json --plot demo.png > demo-summary.json

echo
echo "== report (demo-report.json has every WorkerReport too; demo.png plots the run)"
cat demo-summary.json
