#!/usr/bin/env bash
# A real kubelet joins the k8s_cluster fixture's cluster (scripts/kubelet-node.sh: Debian's
# containerd, runc and CNI plugins, images imported from podman): its Node becomes Ready,
# a pod runs there and its log reads back through the kubelet, and `down` leaves nothing
# behind. On failure the kubelet's and containerd's logs are shown before they go.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ -n "${STAR_CLUSTER_DIR:-}" ] || { echo "needs STAR_CLUSTER_DIR (ctest's k8s_cluster fixture)" >&2; exit 1; }
DIR=$(mktemp -d /tmp/star-kubelet-test.XXXXXX)
rmdir "$DIR"  # kubelet-node.sh up makes it
finish() {
  local rc=$?
  if [ $rc -ne 0 ] && [ -d "$DIR/logs" ]; then
    for f in "$DIR"/logs/*.log; do echo "--- $f (last 40 lines)"; tail -n 40 "$f"; done >&2
  fi
  bash "$ROOT/scripts/kubelet-node.sh" down "$DIR"
  if [ -e "$DIR" ] || ip link show 2>/dev/null | grep -q ' stkb-'; then
    echo "FAIL: down left $DIR or a stkb- bridge behind" >&2
    exit 1
  fi
  exit $rc
}
trap finish EXIT
bash "$ROOT/scripts/kubelet-node.sh" up "$STAR_CLUSTER_DIR" "$DIR"
node=$(cat "$DIR/node")
# The node lifecycle controller takes node.kubernetes.io/not-ready off a Ready node on its
# next pass (every 5 s): only the node's own taint is left then.
taints=
for _ in $(seq 60); do
  taints=$("$STAR_CLUSTER_DIR/bin/kubectl" --kubeconfig "$STAR_CLUSTER_DIR/kubeconfig" get node "$node" \
    -o jsonpath='{.spec.taints[*].key}')
  [ "$taints" != star.dev/kubelet-node ] || break
  sleep 1
done
[ "$taints" = star.dev/kubelet-node ] || { echo "FAIL: node $node taints: '$taints'" >&2; exit 1; }
bash "$ROOT/scripts/kubelet-node.sh" check "$DIR"
echo "PASS: node $node Ready, a pod ran there and was deleted"
