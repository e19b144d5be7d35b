#!/usr/bin/env bash
# A Kubernetes cluster on this machine, on loopback: etcd, kube-apiserver (RBAC and Node
# authorization, service-account token signing, serving certificates from a throwaway CA,
# the default admission plugins, NodeRestriction and OwnerReferencesPermissionEnforcement),
# kube-controller-manager, kube-scheduler, and one test node (star-node) that runs the pods
# scheduled to it as processes, each in its own network namespace and CPU cgroup. Needs
# root.
#
#   bash scripts/cluster.sh up DIR      start it; writes DIR/kubeconfig (cluster admin),
#                                       DIR/bin/{kubectl,helm,...}; prints the kubeconfig's
#                                       path and returns while the cluster runs
#   bash scripts/cluster.sh down DIR    stop everything `up` started and remove DIR (also
#                                       after a crash)
#   bash scripts/cluster.sh tools DIR   only build (or reuse) the binaries, linked into DIR/bin
#
#   STAR_CLUSTER_API_PORT   the API server's port (default: a free one); a busy port fails
#   STAR_NODE_IMAGES        "IMAGE=COMMAND;..." commands for containers that give none
#   STAR_NODE_CPU           the test node's CPU capacity (default 32)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NODE_NAME=star-node-0

die() { echo "cluster.sh: $*" >&2; exit 1; }
log() { echo "cluster.sh: $*" >&2; }
# shellcheck source=lib/daemons.sh
. "$ROOT/scripts/lib/daemons.sh"

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ---- ports -------------------------------------------------------------------------------

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }


# ---- certificates ------------------------------------------------------------------------

# cert NAME CN [O] [SANS]: a key and a certificate signed by the cluster's CA.
cert() {
  local name=$1 cn=$2 org=${3:-} sans=${4:-} subj="/CN=$2" ext
  [ -n "$org" ] && subj="/O=$org/CN=$cn"
  ext=$PKI/$name.ext
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$sans" ]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$sans"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } >"$ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -subj "$subj" \
    -out "$PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -CAcreateserial -days 30 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$ext"
}

make_pki() {
  mkdir -p "$PKI" && chmod 700 "$PKI"
  openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -days 30 \
    -subj "/CN=star-cluster-ca" -out "$PKI/ca.crt" 2>/dev/null
  cert apiserver kube-apiserver "" \
    "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin star-admin system:masters
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert node "system:node:$NODE_NAME" system:nodes
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
}

# kubeconfig FILE CERTNAME: a kubeconfig for the API server with a client certificate.
kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: star
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $2
  user:
    client-certificate: $PKI/$2.crt
    client-key: $PKI/$2.key
contexts:
- name: star
  context: {cluster: star, user: $2}
current-context: star
EOF
}

# ---- processes ---------------------------------------------------------------------------

pick_subnet() {
  local s
  for s in $(seq 1 254); do
    ip link show "stnb-$s" >/dev/null 2>&1 || { echo "$s"; return; }
  done
  die "no free 10.214.S.0/24 for the test node (bridges stnb-1..254 all exist)"
}

# ---- up ----------------------------------------------------------------------------------

start_etcd() {
  local client=$1 peer=$2
  start etcd "$DIR/bin/etcd" --name star --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "star=http://127.0.0.1:$peer" --unsafe-no-fsync --log-level warn
  wait_for etcd 60 curl -sf "http://127.0.0.1:$client/health"
}

start_apiserver() {
  local etcd=$1
  start kube-apiserver "$DIR/bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --cert-dir "$PKI" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction,OwnerReferencesPermissionEnforcement \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range 10.0.0.0/24 --endpoint-reconciler-type none \
    --allow-privileged --profiling=false --v 1
  wait_for kube-apiserver 120 "$DIR/bin/kubectl" --kubeconfig "$DIR/kubeconfig" get --raw /readyz
}

# component NAME PORT EXTRA...: the controller manager or the scheduler, with its own
# client certificate and delegated authentication on its secure port.
start_component() {
  local name=$1 port=$2
  shift 2
  local conf="$DIR/$name.kubeconfig"
  start "kube-$name" "$DIR/bin/kube-$name" --kubeconfig "$conf" \
    --authentication-kubeconfig "$conf" --authorization-kubeconfig "$conf" \
    --bind-address 127.0.0.1 --secure-port "$port" --leader-elect=false --profiling=false "$@"
}

start_node() {
  local subnet=$1 args=()
  local IFS=';' entry
  for entry in ${STAR_NODE_IMAGES:-}; do [ -n "$entry" ] && args+=(--image "$entry"); done
  unset IFS
  start star-node "$DIR/bin/star-node" --kubeconfig "$DIR/node.kubeconfig" --node-name "$NODE_NAME" \
    --state-dir "$DIR/node" --cgroup-root "star-node-$subnet" --subnet "$subnet" \
    --cpu "${STAR_NODE_CPU:-32}" --memory 64Gi "${args[@]}"
  wait_for "the test node" 60 "$DIR/bin/kubectl" --kubeconfig "$DIR/kubeconfig" wait \
    --for=condition=Ready "node/$NODE_NAME" --timeout=1s
}

up() {
  [ "$(id -u)" -eq 0 ] || die "up needs root (network namespaces and cgroups for the pods)"
  if [ -e "$DIR" ] && [ -n "$(ls -A "$DIR" 2>/dev/null | grep -v '^bin$' || true)" ]; then
    die "$DIR is not empty: a cluster may run there (run: bash scripts/cluster.sh down $DIR)"
  fi
  mkdir -p "$DIR/logs" "$DIR/node"
  DIR=$(cd "$DIR" && pwd)
  : >"$DIR/.star-cluster"  # down removes only a folder that up made
  PKI=$DIR/pki
  : >"$DIR/pids"
  bash "$ROOT/scripts/k8s-tools.sh" "$DIR" || die "building the Kubernetes tools failed"
  [ -x "$DIR/bin/star-node" ] || die "missing binary $DIR/bin/star-node"
  API_PORT=${STAR_CLUSTER_API_PORT:-$(free_port)}
  port_busy "$API_PORT" && die "port $API_PORT (STAR_CLUSTER_API_PORT) is busy on 127.0.0.1"
  local subnet
  subnet=$(pick_subnet)
  echo "$subnet" >"$DIR/subnet"
  trap 'log "up failed; stopping what it started"; down_quiet' ERR EXIT
  make_pki
  kubeconfig "$DIR/kubeconfig" admin
  kubeconfig "$DIR/controller-manager.kubeconfig" controller-manager
  kubeconfig "$DIR/scheduler.kubeconfig" scheduler
  kubeconfig "$DIR/node.kubeconfig" node
  local etcd_port
  etcd_port=$(free_port)
  start_etcd "$etcd_port" "$(free_port)"
  start_apiserver "$etcd_port"
  start_component controller-manager "$(free_port)" \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --use-service-account-credentials --cluster-signing-cert-file "$PKI/ca.crt" \
    --cluster-signing-key-file "$PKI/ca.key" --controllers '*,-nodeipam,-cloud-node-lifecycle'
  start_component scheduler "$(free_port)"
  start_node "$subnet"
  wait_for "the default ServiceAccount" 60 "$DIR/bin/kubectl" --kubeconfig "$DIR/kubeconfig" \
    get serviceaccount default -n default
  trap - ERR EXIT
  log "cluster up: API server https://127.0.0.1:$API_PORT, node $NODE_NAME (pods in 10.214.$subnet.0/24)"
  echo "$DIR/kubeconfig"
}

# ---- down --------------------------------------------------------------------------------

# stop_daemons: SIGTERM to each recorded daemon still running what `up` started (its
# command line names DIR), SIGKILL to those left after 10 s.
stop_daemons() {
  [ -f "$DIR/pids" ] || return 0
  local name pid live=()
  while read -r name pid; do
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$DIR/"; then
      kill -TERM "$pid" 2>/dev/null && live+=("$pid")
    fi
  done <"$DIR/pids"
  local i
  for ((i = 0; i < 50 && ${#live[@]} > 0; i++)); do
    local still=()
    for pid in "${live[@]}"; do kill -0 "$pid" 2>/dev/null && still+=("$pid"); done
    live=("${still[@]+"${still[@]}"}")
    [ ${#live[@]} -gt 0 ] && sleep 0.2
  done
  for pid in "${live[@]+"${live[@]}"}"; do kill -KILL "$pid" 2>/dev/null || true; done
}

# remove_pods: what star-node leaves after a crash: pod processes in its cgroups, the
# pods' network namespaces, the bridge.
remove_pods() {
  [ -f "$DIR/subnet" ] || return 0
  local s cg ns
  s=$(cat "$DIR/subnet")
  cg=/sys/fs/cgroup/cpu/star-node-$s
  if [ -d "$cg" ]; then
    find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  fi
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^stn-$s-[0-9]+$" || true); do
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  ip link del "stnb-$s" 2>/dev/null || true
}

down() {
  [ -d "$DIR" ] || { log "$DIR: no cluster there"; return 0; }
  DIR=$(cd "$DIR" && pwd)
  [ -f "$DIR/.star-cluster" ] ||
    die "$DIR was not made by 'cluster.sh up' (no $DIR/.star-cluster): nothing stopped or removed"
  stop_daemons
  remove_pods
  rm -rf "$DIR"
  log "cluster in $DIR stopped and removed"
}

down_quiet() { down >/dev/null 2>&1 || true; }

main() {
  [ $# -eq 2 ] || usage
  DIR=$2
  case $1 in
    up) up ;;
    down) down ;;
    tools) bash "$ROOT/scripts/k8s-tools.sh" "$DIR" ;;
    *) usage ;;
  esac
}

main "$@"
