#!/usr/bin/env bash
# Times a cold build of the cluster tools (scripts/k8s-tools.sh) as a fresh machine does it:
# empty Go module and build caches and an empty tools cache, all in a temporary folder
# that is removed afterwards. Prints one line per step and the total.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d)
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
export GOMODCACHE=$TMP/gomod GOCACHE=$TMP/gocache STAR_TOOLS_CACHE=$TMP/tools
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)  date: $(date -u +%F)"
start=$SECONDS
bash "$ROOT/scripts/k8s-tools.sh" 2>&1 | grep -E "built|building"
echo "total: $((SECONDS - start)) s"
