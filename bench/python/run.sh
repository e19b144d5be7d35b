#!/usr/bin/env bash
# star.torch: the DDP comm hook's overhead against PyTorch's own DDP, AMP's speed per
# batch size, and the heap's page faults at changing batch sizes (/usr/bin/python3 with torch).
#   bash bench/python/run.sh [--device cuda]     (the flag goes to amp_speed.py)
. "$(dirname "$0")/../lib.sh"
build star_shim_python star_shim_python_files
/usr/bin/python3 bench/python/hook_overhead.py --build "$BUILD"
/usr/bin/python3 bench/python/amp_speed.py "$@"
/usr/bin/python3 bench/python/heap_probe.py
