#!/usr/bin/env bash
# Builds the pinned Kubernetes tools from their projects' own Go modules and caches them
# by version: kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
# (k8s.io/kubernetes, through a wrapper module that replaces each k8s.io staging module
# with its published version), etcd (go.etcd.io/etcd/server/v3), helm (helm.sh/helm/v3)
# and star-node (tests/support/node: the test node that runs pods as processes).
# Nothing is rebuilt when the binaries of these versions are present.
#
#   bash scripts/k8s-tools.sh [DIR]   build (or reuse), then link the binaries into DIR/bin
#   bash scripts/k8s-tools.sh --kubelet   build (or reuse) the kubelet; print its path
#   STAR_TOOLS_CACHE                  where the binaries are kept
#                                     (default ${XDG_CACHE_HOME:-$HOME/.cache}/star/tools)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

K8S_VERSION=v1.36.3
STAGING_VERSION=v0.36.3
ETCD_VERSION=v3.6.8      # the etcd that k8s.io/kubernetes $K8S_VERSION requires
HELM_VERSION=v3.22.0
HELM_K8S_MINOR=37        # the k8s.io modules helm $HELM_VERSION is built with (its Makefile's default)
CACHE=${STAR_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/star/tools}
K8S_BIN=$CACHE/k8s-$K8S_VERSION-etcd-$ETCD_VERSION/bin
HELM_BIN=$CACHE/helm-$HELM_VERSION-k1.$HELM_K8S_MINOR/bin
KUBELET_BIN=$CACHE/kubelet-$K8S_VERSION/bin
NODE_SRC=$ROOT/tests/support/node
NODE_BIN=""  # set by build_node: keyed by a hash of star-node's sources

log() { echo "k8s-tools: $*" >&2; }

require_go() {
  command -v go >/dev/null 2>&1 && return
  [ -x /usr/local/go/bin/go ] && { export PATH=/usr/local/go/bin:$PATH; return; }
  log "go is not on PATH (Go 1.26 or later is needed to build the Kubernetes tools)"
  exit 1
}

# The wrapper module: k8s.io/kubernetes requires its staging modules at v0.0.0 and
# replaces them with ./staging/src/...; a dependent module replaces them with releases.
write_k8s_module() {
  local dir=$1 mod
  mkdir -p "$dir"
  {
    echo "module star.dev/k8s-tools"
    echo
    echo "go 1.26.0"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes $K8S_VERSION"
    echo "	go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    echo ")"
    echo
    echo "replace ("
    for mod in $(staging_modules); do
      echo "	$mod => $mod $STAGING_VERSION"
    done
    echo ")"
  } >"$dir/go.mod"
  cat >"$dir/tools.go" <<'GO'
//go:build tools

// Package tools pins the commands this module builds.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
GO
  local extra
  for extra in "${@:2}"; do echo "	_ \"k8s.io/kubernetes/cmd/$extra\"" >>"$dir/tools.go"; done
  echo ")" >>"$dir/tools.go"
}

# The k8s.io modules that k8s.io/kubernetes requires at v0.0.0 (its staging modules).
staging_modules() {
  local gomod
  gomod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$gomod" | sort -u
}

version_ldflags() {
  local pkg flags=""
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    flags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitTreeState=clean"
    flags+=" -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
  done
  echo "-s -w$flags"
}

build_k8s() {
  [ -x "$K8S_BIN/kube-apiserver" ] && [ -x "$K8S_BIN/kubectl" ] &&
    [ -x "$K8S_BIN/kube-controller-manager" ] && [ -x "$K8S_BIN/kube-scheduler" ] &&
    [ -x "$K8S_BIN/etcd" ] && return
  log "building Kubernetes $K8S_VERSION and etcd $ETCD_VERSION into $K8S_BIN (first time only; tens of minutes on 2 cores)"
  local work cmd start=$SECONDS
  work=$(mktemp -d)
  write_k8s_module "$work"
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true)
  mkdir -p "$work/out"
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    log "  $cmd"
    (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
      -ldflags "$(version_ldflags)" -o "out/$cmd" "k8s.io/kubernetes/cmd/$cmd")
  done
  log "  etcd"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" \
    -o out/etcd go.etcd.io/etcd/server/v3)
  mkdir -p "$(dirname "$K8S_BIN")" && rm -rf "$K8S_BIN" && mv "$work/out" "$K8S_BIN"
  rm -rf "$work"
  log "built Kubernetes tools in $((SECONDS - start)) s"
}

# The kubelet (scripts/kubelet-node.sh's node), from the same wrapper module.
build_kubelet() {
  [ -x "$KUBELET_BIN/kubelet" ] && return
  log "building kubelet $K8S_VERSION into $KUBELET_BIN"
  local work start=$SECONDS
  work=$(mktemp -d)
  write_k8s_module "$work" kubelet
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true)
  mkdir -p "$work/out"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
    -ldflags "$(version_ldflags)" -o out/kubelet k8s.io/kubernetes/cmd/kubelet)
  mkdir -p "$(dirname "$KUBELET_BIN")" && rm -rf "$KUBELET_BIN" && mv "$work/out" "$KUBELET_BIN"
  rm -rf "$work"
  log "built kubelet in $((SECONDS - start)) s"
}

build_helm() {
  [ -x "$HELM_BIN/helm" ] && return
  log "building helm $HELM_VERSION into $HELM_BIN"
  local start=$SECONDS
  mkdir -p "$HELM_BIN.partial"
  local flags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" pkg
  # As helm's Makefile does: the Kubernetes version `helm template` and `helm lint` assume.
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    flags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$HELM_K8S_MINOR"
  done
  CGO_ENABLED=0 GOBIN="$HELM_BIN.partial" go install -trimpath -ldflags "$flags" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  rm -rf "$HELM_BIN" && mv "$HELM_BIN.partial" "$HELM_BIN"
  log "built helm in $((SECONDS - start)) s"
}

build_node() {
  local key
  key=$(cat "$NODE_SRC"/*.go "$NODE_SRC"/go.mod | sha256sum | cut -c1-16)
  NODE_BIN=$CACHE/star-node-$K8S_VERSION-$key/bin
  [ -x "$NODE_BIN/star-node" ] && return
  log "building star-node into $NODE_BIN"
  mkdir -p "$NODE_BIN.partial"
  (cd "$NODE_SRC" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" \
    -o "$NODE_BIN.partial/star-node" .)
  rm -rf "$NODE_BIN" && mv "$NODE_BIN.partial" "$NODE_BIN"
}

# The Go test tools under tests/support: star-faultproxy (faultproxy/, the fault-injecting
# proxy that tests put in front of the API server) and star-flood (flood/, the request
# flood of the abuse tests). Built as star-node is, keyed by a hash of their sources;
# linked into DIR/bin when DIR is given.
build_support_tool() {
  local name=$1 src=$ROOT/tests/support/$2 dir=${3:-} key bin
  [ -f "$src/go.mod" ] || return 0
  key=$(cat "$src"/*.go "$src"/go.mod | sha256sum | cut -c1-16)
  bin=$CACHE/$name-$key/bin
  if [ ! -x "$bin/$name" ]; then
    log "building $name into $bin"
    mkdir -p "$bin.partial"
    (cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" \
      -o "$bin.partial/$name" .)
    rm -rf "$bin" && mv "$bin.partial" "$bin"
  fi
  if [ -n "$dir" ]; then mkdir -p "$dir/bin" && ln -sf "$bin/$name" "$dir/bin/$name"; fi
}

link_into() {
  local dir=$1/bin f
  mkdir -p "$dir"
  for f in "$K8S_BIN"/* "$HELM_BIN/helm" ${NODE_BIN:+"$NODE_BIN/star-node"}; do
    ln -sf "$f" "$dir/$(basename "$f")"
  done
}

main() {
  require_go
  if [ "${1:-}" = --kubelet ]; then
    build_kubelet
    echo "$KUBELET_BIN/kubelet"
    return 0
  fi
  build_k8s
  build_helm
  if [ -f "$NODE_SRC/go.mod" ]; then build_node; fi
  build_support_tool star-faultproxy faultproxy "${1:-}"
  build_support_tool star-flood flood "${1:-}"
  [ $# -ge 1 ] && link_into "$1"
  return 0
}

main "$@"
