#!/usr/bin/env bash
# The k8s_cluster ctest fixture: one cluster (scripts/cluster.sh) for every test labelled
# k8s, with the CRDs of crds/ installed and established, and the garbage collector
# following them; each test works in namespaces of its own.
#   fixture.sh up DIR | fixture.sh down DIR
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$2

# The garbage collector learns of new resources at its next discovery sync (every 30 s):
# until then a deleted TrainingJob's pods stay. Returns once it has removed a dependent of
# a deleted TrainingJob, as the tests' cascades need (within 120 s).
gc_follows_trainingjobs() {
  local ns=star-fixture-gc uid i
  "${kubectl[@]}" create namespace "$ns" >/dev/null
  "${kubectl[@]}" apply -n "$ns" -f "$SRC/tests/k8s/testdata/gc-probe.yaml" >/dev/null
  uid=$("${kubectl[@]}" get tj probe -n "$ns" -o jsonpath='{.metadata.uid}')
  "${kubectl[@]}" create configmap probe-dependent -n "$ns" -o json --dry-run=client |
    python3 -c 'import json,sys; o=json.load(sys.stdin); o["metadata"]["ownerReferences"]=[{"apiVersion":"star.dev/v1alpha1","kind":"TrainingJob","name":"probe","uid":sys.argv[1]}]; print(json.dumps(o))' "$uid" |
    "${kubectl[@]}" apply -n "$ns" -f - >/dev/null
  "${kubectl[@]}" delete tj probe -n "$ns" >/dev/null
  for ((i = 0; i < 120; i++)); do
    if ! "${kubectl[@]}" get configmap probe-dependent -n "$ns" >/dev/null 2>&1; then
      "${kubectl[@]}" delete namespace "$ns" --wait=false >/dev/null
      echo "fixture.sh: the garbage collector follows TrainingJobs (after ${i} s)"
      return 0
    fi
    sleep 1
  done
  echo "fixture.sh: the garbage collector did not remove a deleted TrainingJob's dependent in 120 s" >&2
  return 1
}

case $1 in
  up)
    bash "$SRC/scripts/cluster.sh" down "$DIR"  # what a killed run left behind
    bash "$SRC/scripts/cluster.sh" up "$DIR"
    kubectl=("$DIR/bin/kubectl" --kubeconfig "$DIR/kubeconfig")
    "${kubectl[@]}" apply --server-side -f "$SRC/crds/"
    "${kubectl[@]}" wait --for condition=established --timeout=60s \
      crd/trainingjobs.star.dev crd/nodeallocations.star.dev
    gc_follows_trainingjobs
    ;;
  down)
    bash "$SRC/scripts/cluster.sh" down "$DIR"
    ;;
  *)
    echo "usage: fixture.sh up|down DIR" >&2
    exit 2
    ;;
esac
