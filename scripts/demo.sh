#!/usr/bin/env bash
# The README's first command: installs dependencies, builds the `star` tool and runs the
# decision core on the bundled examples:
#   1. replays a 4-worker trace in which worker 2 gets a co-located neighbour and
#      worker 3 a congested link, printing each straggler onset and recovery;
#   2. chooses a synchronization mode for 8 workers, one of them 2.8x slower;
#   3. splits a global batch of 512 across 4 workers of unequal speed (BOA).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
BUILD_DIR=${STAR_BUILD_DIR:-build}
GEN=()
command -v ninja >/dev/null 2>&1 && [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && GEN=(-G Ninja)
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DSTAR_WERROR=ON >/dev/null
cmake --build "$BUILD_DIR" --target star --parallel "$(nproc)"
STAR="$BUILD_DIR/cli/star"

section() { printf '\n== %s\n' "$*"; }

section "star detect --trace examples/traces/neighbor.csv"
echo "   (4 workers x 300 iterations; worker 2: neighbour at iterations 100-179;"
echo "    worker 3: congested link at iterations 220-269)"
"$STAR" detect --trace examples/traces/neighbor.csv

section "star select --input examples/select-input.json"
cat examples/select-input.json
"$STAR" select --input examples/select-input.json

section "star plan-batches --input examples/plan-batches-input.json"
"$STAR" plan-batches --input examples/plan-batches-input.json

section "done"
echo "Try: $STAR --help"
