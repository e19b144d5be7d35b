#!/usr/bin/env bash
# A second node for a cluster that scripts/cluster.sh started: a real kubelet (v1.36.3,
# built as scripts/k8s-tools.sh builds the other Kubernetes tools) with Debian's containerd,
# runc and CNI plugins. Its images are made locally with podman (busybox from Debian's
# busybox-static) and imported into containerd; nothing is pulled. Needs root, cgroups
# and overlayfs. The tests' pods run on star-node; this node is tainted
# star.dev/kubelet-node:NoSchedule, and tests/k8s/kubelet_test.sh runs up, check and down.
#
#   bash scripts/kubelet-node.sh up CLUSTER DIR   start the node in DIR for the cluster in
#                                                 CLUSTER; waits until the Node is Ready
#   bash scripts/kubelet-node.sh check DIR        run a pod on the node, read its log through
#                                                 the kubelet and delete it
#   bash scripts/kubelet-node.sh down DIR         stop everything `up` started, undo its
#                                                 mounts, bridge, cgroups and sysctls, remove
#                                                 DIR (also after a crash)
#
#   STAR_KUBELET_NODE     the Node's name (default kubelet-0)
#   apt-get install containerd runc containernetworking-plugins busybox-static podman
#
# The node's pods are on the bridge stkb-S (10.215.S.0/24; the node's InternalIP is
# 10.215.S.1, where the kubelet listens), under the cgroup /star-kubelet-S. Images:
# localhost/star-kubelet/pause:1 (the sandbox) and localhost/star-kubelet/busybox:1.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NODE_NAME=${STAR_KUBELET_NODE:-kubelet-0}
PAUSE_IMAGE=localhost/star-kubelet/pause:1
TEST_IMAGE=localhost/star-kubelet/busybox:1
# The kubelet changes these at start; down puts back what they were.
SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"

die() { echo "kubelet-node.sh: $*" >&2; exit 1; }
log() { echo "kubelet-node.sh: $*" >&2; }
# shellcheck source=lib/daemons.sh
. "$ROOT/scripts/lib/daemons.sh"

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}


# ---- the kubelet binary ------------------------------------------------------------------

build_kubelet() { KUBELET=$(bash "$ROOT/scripts/k8s-tools.sh" --kubelet); }

# ---- images ------------------------------------------------------------------------------

# import_images: a pause image and a busybox image, built with podman from Debian's static
# busybox, saved and imported into containerd's k8s.io namespace, then dropped from podman.
import_images() {
  local ctx=$DIR/images name
  mkdir -p "$ctx/rootfs/bin" "$ctx/rootfs/etc" "$ctx/rootfs/tmp" "$ctx/rootfs/proc" "$ctx/rootfs/sys" "$ctx/rootfs/dev"
  cp /bin/busybox "$ctx/rootfs/bin/busybox"
  for name in sh sleep cat echo ls ps hostname ip id wget; do ln -sf busybox "$ctx/rootfs/bin/$name"; done
  echo 'root:x:0:0:root:/:/bin/sh' >"$ctx/rootfs/etc/passwd"
  echo 'root:x:0:' >"$ctx/rootfs/etc/group"
  # The sandbox's process: PID 1 of the pod, it only waits (SIGKILL stops it).
  printf 'FROM scratch\nCOPY rootfs/ /\nENTRYPOINT ["/bin/sleep", "2147483647"]\n' >"$ctx/Containerfile.pause"
  printf 'FROM scratch\nCOPY rootfs/ /\nCMD ["/bin/sh"]\n' >"$ctx/Containerfile.busybox"
  podman build -q --isolation chroot -f "$ctx/Containerfile.pause" -t "$PAUSE_IMAGE" "$ctx" >/dev/null
  podman build -q --isolation chroot -f "$ctx/Containerfile.busybox" -t "$TEST_IMAGE" "$ctx" >/dev/null
  for name in "$PAUSE_IMAGE" "$TEST_IMAGE"; do
    rm -f "$ctx/image.tar"
    podman save -q -o "$ctx/image.tar" "$name"
    ctr -a "$SOCK" -n k8s.io images import "$ctx/image.tar" >/dev/null
    podman rmi -f "$name" >/dev/null
  done
  rm -rf "$ctx"
}

# ---- up ----------------------------------------------------------------------------------

pick_subnet() {
  local s
  for s in $(seq 1 254); do
    ip link show "stkb-$s" >/dev/null 2>&1 || { echo "$s"; return; }
  done
  die "no free 10.215.S.0/24 (bridges stkb-1..254 all exist)"
}

cgroup_dirs() {
  local h
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [ -f "$h/cgroup.procs" ] && echo "${h%/}/star-kubelet-$1"
  done
}

write_containerd_config() {
  cat >"$DIR/containerd.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # the pause container asks for oom_score_adj -998, which needs CAP_SYS_RESOURCE
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$DIR/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni"
EOF
  mkdir -p "$DIR/cni"
  cat >"$DIR/cni/10-star-kubelet.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "star-kubelet-$SUBNET",
  "plugins": [
    {"type": "bridge", "bridge": "stkb-$SUBNET", "isGateway": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$DIR/cni/ipam",
              "ranges": [[{"subnet": "10.215.$SUBNET.0/24", "gateway": "10.215.$SUBNET.1"}]]}},
    {"type": "loopback"}
  ]
}
EOF
}

write_kubelet_config() {
  local pki=$CLUSTER/pki
  mkdir -p "$DIR/pki"
  # A client certificate for system:node:NAME (the Node authorizer and NodeRestriction) and
  # a serving certificate for the kubelet's port, both from the cluster's CA.
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$DIR/pki/client.ext"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:%s,DNS:%s\n' \
    "$NODE_IP" "$NODE_NAME" >"$DIR/pki/serving.ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$DIR/pki/kubelet.key" \
    -subj "/O=system:nodes/CN=system:node:$NODE_NAME" -out "$DIR/pki/kubelet.csr" 2>/dev/null
  openssl req -new -newkey rsa:2048 -nodes -keyout "$DIR/pki/serving.key" \
    -subj "/CN=$NODE_NAME" -out "$DIR/pki/serving.csr" 2>/dev/null
  openssl x509 -req -in "$DIR/pki/kubelet.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAserial "$DIR/pki/ca.srl" -CAcreateserial -days 30 -extfile "$DIR/pki/client.ext" \
    -out "$DIR/pki/kubelet.crt" 2>/dev/null
  openssl x509 -req -in "$DIR/pki/serving.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAserial "$DIR/pki/ca.srl" -days 30 -extfile "$DIR/pki/serving.ext" \
    -out "$DIR/pki/serving.crt" 2>/dev/null
  cat >"$DIR/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: star
  cluster:
    server: $(sed -n 's/^ *server: //p' "$CLUSTER/kubeconfig")
    certificate-authority: $pki/ca.crt
users:
- name: kubelet
  user:
    client-certificate: $DIR/pki/kubelet.crt
    client-key: $DIR/pki/kubelet.key
contexts:
- name: star
  context: {cluster: star, user: kubelet}
current-context: star
EOF
  # The cluster's API server presents no client certificate to kubelets, so `kubectl logs`
  # and `exec` reach this kubelet anonymously; it listens on the node's bridge address only.
  cat >"$DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $(free_port)
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $(free_port)
tlsCertFile: $DIR/pki/serving.crt
tlsPrivateKeyFile: $DIR/pki/serving.key
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: /star-kubelet-$SUBNET
failSwapOn: false
failCgroupV1: false
# no KUBE-FIREWALL and canary chains in the host's iptables
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://$SOCK
resolvConf: /etc/resolv.conf
evictionHard: {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Only pods that tolerate it are scheduled here: the cluster's other pods stay on star-node.
registerWithTaints: [{key: star.dev/kubelet-node, effect: NoSchedule}]
EOF
}

up() {
  [ "$(id -u)" -eq 0 ] || die "up needs root"
  [ -f "$CLUSTER/.star-cluster" ] && [ -f "$CLUSTER/pki/ca.key" ] ||
    die "$CLUSTER: no cluster from scripts/cluster.sh there"
  local cmd
  for cmd in containerd ctr runc podman /usr/lib/cni/bridge /bin/busybox; do
    command -v "$cmd" >/dev/null 2>&1 ||
      die "missing $cmd (apt-get install containerd runc containernetworking-plugins busybox-static podman)"
  done
  [ -e "$DIR" ] && die "$DIR exists: a node may run there (run: bash scripts/kubelet-node.sh down $DIR)"
  CLUSTER=$(cd "$CLUSTER" && pwd)
  build_kubelet
  mkdir -p "$DIR/logs"
  DIR=$(cd "$DIR" && pwd)
  : >"$DIR/.star-kubelet-node"
  : >"$DIR/pids"
  trap 'log "up failed; stopping what it started"; down >/dev/null 2>&1 || true' ERR EXIT
  SOCK=$DIR/containerd/containerd.sock
  SUBNET=$(pick_subnet)
  NODE_IP=10.215.$SUBNET.1
  echo "$SUBNET" >"$DIR/subnet"
  echo "$NODE_NAME" >"$DIR/node"
  echo "$CLUSTER" >"$DIR/cluster"
  local s
  for s in $SYSCTLS; do echo "$s=$(sysctl -n "$s")"; done >"$DIR/sysctls"
  # The bridge is made here (the CNI plugin adopts it) so that the node has its address
  # before the first pod: the kubelet refuses a loopback node IP.
  ip link add "stkb-$SUBNET" type bridge
  ip addr add "$NODE_IP/24" dev "stkb-$SUBNET"
  ip link set "stkb-$SUBNET" up
  local d
  for d in $(cgroup_dirs "$SUBNET"); do mkdir -p "$d"; done
  write_containerd_config
  start containerd containerd --config "$DIR/containerd.toml"
  wait_for containerd 30 ctr -a "$SOCK" version
  import_images
  write_kubelet_config
  start kubelet "$KUBELET" --config "$DIR/kubelet.yaml" --kubeconfig "$DIR/kubelet.kubeconfig" \
    --root-dir "$DIR/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
  wait_for "the Node $NODE_NAME" 120 "$CLUSTER/bin/kubectl" --kubeconfig "$CLUSTER/kubeconfig" \
    wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
  trap - ERR EXIT
  log "node $NODE_NAME Ready (kubelet on $NODE_IP; pods in 10.215.$SUBNET.0/24; images $PAUSE_IMAGE, $TEST_IMAGE)"
}

# ---- check -------------------------------------------------------------------------------

check() {
  [ -f "$DIR/.star-kubelet-node" ] || die "$DIR: no node from 'kubelet-node.sh up' there"
  DIR=$(cd "$DIR" && pwd)
  local cluster node pod=kubelet-check start=$SECONDS addr port out
  cluster=$(cat "$DIR/cluster") node=$(cat "$DIR/node")
  local kc=(--kubeconfig "$cluster/kubeconfig")
  PATH=$cluster/bin:$PATH
  kubectl "${kc[@]}" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $pod, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: star.dev/kubelet-node, operator: Exists}]
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: $TEST_IMAGE
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo hello from \$(hostname) \$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace); trap 'exit 0' TERM; while :; do sleep 1; done"]
    resources: {limits: {cpu: 100m, memory: 32Mi}}
EOF
  kubectl "${kc[@]}" wait --for=condition=Ready "pod/$pod" --timeout=120s >/dev/null
  log "pod $pod Ready in $((SECONDS - start)) s"
  # The kubelet's own API (the API server reaches it only by the node's InternalIP when
  # it prefers that address type; it dials the Node's Hostname first by default).
  addr=$(kubectl "${kc[@]}" get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
  port=$(kubectl "${kc[@]}" get node "$node" -o jsonpath='{.status.daemonEndpoints.kubeletEndpoint.Port}')
  out=$(curl -sf --cacert "$cluster/pki/ca.crt" "https://$addr:$port/containerLogs/default/$pod/main")
  echo "$out"
  [ "$out" = "hello from $pod default" ] || die "unexpected log: $out"
  start=$SECONDS
  kubectl "${kc[@]}" delete pod "$pod" --wait=true >/dev/null
  log "pod $pod deleted in $((SECONDS - start)) s"
}

# ---- down --------------------------------------------------------------------------------

kill_wait() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
}

down() {
  [ -d "$DIR" ] || { log "$DIR: no node there"; return 0; }
  DIR=$(cd "$DIR" && pwd)
  [ -f "$DIR/.star-kubelet-node" ] ||
    die "$DIR was not made by 'kubelet-node.sh up': nothing stopped or removed"
  local name pid sock=$DIR/containerd/containerd.sock id s d m
  # The kubelet first, so that it restarts nothing; then the pods' containers.
  if [ -f "$DIR/pids" ]; then
    while read -r name pid; do
      [ "$name" = kubelet ] && { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF "$DIR/" &&
        kill_wait "$pid"
    done <"$DIR/pids"
  fi
  if [ -S "$sock" ]; then
    for id in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$sock" -n k8s.io tasks kill -s KILL "$id" >/dev/null 2>&1 || true
    done
    sleep 1
    for id in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$sock" -n k8s.io tasks rm -f "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr -a "$sock" -n k8s.io containers ls -q 2>/dev/null); do
      ctr -a "$sock" -n k8s.io containers rm "$id" >/dev/null 2>&1 || true
    done
  fi
  if [ -f "$DIR/pids" ]; then
    while read -r name pid; do
      { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF "$DIR/" && kill_wait "$pid"
    done <"$DIR/pids"
  fi
  # containerd's shims outlive it.
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $sock" || true); do kill_wait "$pid"; done
  if [ -f "$DIR/subnet" ]; then
    s=$(cat "$DIR/subnet")
    for d in $(cgroup_dirs "$s"); do
      [ -d "$d" ] || continue
      find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
      sleep 0.2
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done
    ip link del "stkb-$s" 2>/dev/null || true
  fi
  # Mounts under DIR (the kubelet's root, pods' volumes, network namespaces, rootfs), deepest first.
  for m in $(awk -v d="$DIR" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
    umount -R "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  # what an interrupted import_images left in podman
  podman rmi -f "$PAUSE_IMAGE" "$TEST_IMAGE" >/dev/null 2>&1 || true
  # containerd 1.6 keeps its shims' sockets in /run/containerd/s whatever its state dir.
  rmdir /run/containerd/s /run/containerd/fifo /run/containerd 2>/dev/null || true
  if [ -f "$DIR/sysctls" ]; then
    while IFS== read -r name d; do sysctl -qw "$name=$d" 2>/dev/null || true; done <"$DIR/sysctls"
  fi
  # The Node and its pods, while the cluster runs.
  if [ -f "$DIR/cluster" ] && [ -f "$DIR/node" ] && [ -f "$(cat "$DIR/cluster")/kubeconfig" ]; then
    "$(cat "$DIR/cluster")/bin/kubectl" --kubeconfig "$(cat "$DIR/cluster")/kubeconfig" \
      delete node "$(cat "$DIR/node")" --ignore-not-found --timeout=20s >/dev/null 2>&1 || true
  fi
  rm -rf "$DIR"
  log "node in $DIR stopped and removed"
}

main() {
  case ${1:-} in
    up) [ $# -eq 3 ] || usage; CLUSTER=$2 DIR=$3; up ;;
    check) [ $# -eq 2 ] || usage; DIR=$2; check ;;
    down) [ $# -eq 2 ] || usage; DIR=$2; down ;;
    *) usage ;;
  esac
}

main "$@"
