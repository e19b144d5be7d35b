# Sourced by each bench/NAME/run.sh: strict mode, the repository root as the working
# directory, the build directory ($STAR_BUILD_DIR, default build/) in BUILD, and
# `build TARGET...`, which builds what the benchmark runs (stdout kept for its numbers).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=${STAR_BUILD_DIR:-build}
build() { cmake --build "$BUILD" --target "$@" --parallel "${STAR_JOBS:-2}" >&2; }
