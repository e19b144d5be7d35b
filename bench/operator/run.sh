#!/usr/bin/env bash
# Runs operator_reconcile_bench on a throwaway cluster: scripts/cluster.sh up in a temporary
# folder, the CRDs applied, the bench (with --keep: the cluster goes anyway), and
# scripts/cluster.sh down when it ends, however it ends. Needs root (as cluster.sh up).
#
#   bash bench/operator/run.sh [BENCH FLAGS...]     e.g. --jobs 20 --workers 4
#
#   STAR_BUILD_DIR   where operator_reconcile_bench was built (default: build)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${STAR_BUILD_DIR:-$ROOT/build}
BENCH=$BUILD/bench/operator_reconcile_bench
[ -x "$BENCH" ] || {
  echo "run.sh: $BENCH is not built (cmake --build $BUILD --target operator_reconcile_bench)" >&2
  exit 1
}

DIR=$(mktemp -d /tmp/star-bench-cluster.XXXXXX)
down() { bash "$ROOT/scripts/cluster.sh" down "$DIR" >&2 || true; }
trap down EXIT
trap 'exit 130' INT TERM

bash "$ROOT/scripts/cluster.sh" up "$DIR" >/dev/null
KUBECTL=("$DIR/bin/kubectl" --kubeconfig "$DIR/kubeconfig")
"${KUBECTL[@]}" apply --server-side -f "$ROOT/crds" >/dev/null
"${KUBECTL[@]}" wait --for condition=Established crd --all --timeout 60s >/dev/null
echo "server: kube-apiserver $("${KUBECTL[@]}" version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])') (scripts/cluster.sh)"

"$BENCH" --kubeconfig "$DIR/kubeconfig" --keep "$@"
