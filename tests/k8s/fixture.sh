#!/usr/bin/env bash
# The k8s_cluster ctest fixture: one cluster (scripts/cluster.sh) for every test labelled
# k8s, with the CRDs of crds/ installed and established; each test works in namespaces of
# its own.
#   fixture.sh up DIR | fixture.sh down DIR
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$2
case $1 in
  up)
    bash "$SRC/scripts/cluster.sh" down "$DIR"  # what a killed run left behind
    bash "$SRC/scripts/cluster.sh" up "$DIR"
    kubectl=("$DIR/bin/kubectl" --kubeconfig "$DIR/kubeconfig")
    "${kubectl[@]}" apply --server-side -f "$SRC/crds/"
    "${kubectl[@]}" wait --for condition=established --timeout=60s \
      crd/trainingjobs.star.dev crd/nodeallocations.star.dev
    ;;
  down)
    bash "$SRC/scripts/cluster.sh" down "$DIR"
    ;;
  *)
    echo "usage: fixture.sh up|down DIR" >&2
    exit 2
    ;;
esac
