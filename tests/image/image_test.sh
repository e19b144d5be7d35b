#!/usr/bin/env bash
# The container images (Dockerfile) built and run with podman, as root:
#   build     the three targets, on a base image made from Debian's archive (mmdebstrap)
#   operator  the operator image against the API emulator on the host network: a
#             TrainingJob applied with kubectl becomes pods
#   agent     the agent image with the host's cgroup hierarchy: a NodeAllocation file
#             (YAML) sets a test cgroup's CPU quota, and an empty one restores it
#   trainer   the trainer image trains a few iterations on Fashion-MNIST
# Usage: image_test.sh build|operator|agent|trainer|clean  (build first; the others reuse
# its images; clean removes them and the base image)
# Environment: STAR_SOURCE_DIR, STAR_APISERVER_BINARY, STAR_KUBECTL, STAR_IMAGE_TAG.
# Runs only with STAR_IMAGE_TESTS=1 (the build takes about ten minutes on two cores);
# exit 77 (skipped) otherwise, and without root, podman or mmdebstrap.
set -euo pipefail

SRC=${STAR_SOURCE_DIR:?}
TAG=${STAR_IMAGE_TAG:-star-image-test}
BASE=localhost/star-test-debian:bookworm
PODMAN=(podman --runtime runc --cgroup-manager cgroupfs)
RUN=("${PODMAN[@]}" run --rm --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --network host)

skip() { echo "SKIPPED: $*"; exit 77; }
[ "${STAR_IMAGE_TESTS:-0}" = 1 ] || skip "set STAR_IMAGE_TESTS=1 to build and run the images"
[ "$(id -u)" = 0 ] || skip "needs root (podman build --isolation chroot)"
command -v podman >/dev/null || skip "podman not installed (apt-get install podman runc)"
command -v mmdebstrap >/dev/null || skip "mmdebstrap not installed"

WORK=$(mktemp -d /tmp/star-image-test-XXXXXX)
CLEANUP=()
cleanup() {
  for c in "${CLEANUP[@]}"; do eval "$c" || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# The base image: Debian's minbase from the archive (no registry is reachable), made once.
base_image() {
  if "${PODMAN[@]}" image exists "$BASE"; then return; fi
  echo "image_test: making $BASE with mmdebstrap"
  mmdebstrap --quiet --variant=minbase bookworm "$WORK/base.tar"
  "${PODMAN[@]}" import "$WORK/base.tar" "$BASE" >/dev/null
}

build() {
  base_image
  for target in operator agent trainer; do
    local start=$SECONDS
    "${PODMAN[@]}" build --isolation chroot --network host --target "$target" \
      --build-arg BUILD_IMAGE="$BASE" --build-arg BASE_IMAGE="$BASE" \
      -t "localhost/star-$target:$TAG" -f "$SRC/Dockerfile" "$SRC" >"$WORK/build-$target.log" 2>&1 ||
      { tail -50 "$WORK/build-$target.log"; echo "FAIL: podman build --target $target"; exit 1; }
    echo "image_test: built star-$target in $((SECONDS - start)) s," \
      "$("${PODMAN[@]}" image inspect --format '{{.Size}}' "localhost/star-$target:$TAG") bytes"
  done
  # The operator runs as a non-root user.
  local user
  user=$("${PODMAN[@]}" image inspect --format '{{.Config.User}}' "localhost/star-operator:$TAG")
  [ "$user" = "65532:65532" ] || { echo "FAIL: the operator image runs as '$user'"; exit 1; }
}

# Polls `cmd` until it succeeds, at most `n` times, a second apart.
eventually() {
  local n=$1; shift
  for _ in $(seq "$n"); do
    if "$@"; then return 0; fi
    sleep 1
  done
  "$@"
}

operator() {
  local kc=$WORK/kubeconfig
  "${STAR_APISERVER_BINARY:?}" --listen 127.0.0.1:0 --crds "$SRC/crds" --kubeconfig-out "$kc" \
    >"$WORK/apiserver.out" 2>"$WORK/apiserver.err" &
  local api=$!
  CLEANUP+=("kill $api; wait $api")
  eventually 30 grep -q "listening on" "$WORK/apiserver.out"
  chmod 0644 "$kc"
  "${RUN[@]}" -d --name "star-operator-$TAG-$$" -v "$kc:/etc/star/kubeconfig:ro" \
    "localhost/star-operator:$TAG" --kubeconfig /etc/star/kubeconfig --report-listen 127.0.0.1:0 \
    --metrics-listen "" >/dev/null
  CLEANUP+=("${PODMAN[*]} rm -f star-operator-$TAG-$$ >/dev/null")
  local kubectl=("${STAR_KUBECTL:?}" --kubeconfig "$kc" --cache-dir "$WORK/cache")
  sed -e 's/replicas: 4/replicas: 2/' "$SRC/examples/fmnist-job.yaml" | "${kubectl[@]}" apply -f - >/dev/null
  local job
  job=$("${kubectl[@]}" get tj -o jsonpath='{.items[0].metadata.name}')
  pods() { [ "$("${kubectl[@]}" get pods -l "star.dev/job=$job" -o name | wc -l)" -ge 2 ]; }
  eventually 60 pods || { "${PODMAN[@]}" logs "star-operator-$TAG-$$" | tail -30; echo "FAIL: no pods"; exit 1; }
  echo "image_test: the operator image made the pods of $job:" $("${kubectl[@]}" get pods -o name)
}

agent() {
  local uid=5b1e7c3a-9d2f-4e6b-8a1c-3f5d7e9b0a2c root=star-image-test-$$ cpu=/sys/fs/cgroup/cpu
  [ -f $cpu/cpu.cfs_quota_us ] || skip "no cgroup v1 cpu hierarchy at $cpu"
  local pod=$cpu/$root/kubepods/burstable/pod$uid
  mkdir -p "$pod"
  CLEANUP+=("rmdir $pod $cpu/$root/kubepods/burstable $cpu/$root/kubepods $cpu/$root")
  echo 200000 >"$pod/cpu.cfs_quota_us"
  printf 'apiVersion: star.dev/v1alpha1\nkind: NodeAllocation\nmetadata:\n  name: node-1\nspec:\n  pods:\n  - namespace: ns\n    name: p\n    uid: %s\n    cpu: {quotaMillicores: 500, weight: 100}\n' \
    "$uid" >"$WORK/a.yaml"
  local agent=("${RUN[@]}" --privileged -v /sys/fs/cgroup:/sys/fs/cgroup -v "$WORK:/work"
    "localhost/star-agent:$TAG" --node node-1 --allocation-file /work/a.yaml --cgroup-root "$root"
    --driver cgroupfs --journal /work/journal.json --metrics-address "" --once)
  "${agent[@]}" || { echo "FAIL: the agent image's --once pass"; exit 1; }
  [ "$(cat "$pod/cpu.cfs_quota_us")" = 50000 ] || { echo "FAIL: quota $(cat "$pod/cpu.cfs_quota_us"), want 50000"; exit 1; }
  printf 'apiVersion: star.dev/v1alpha1\nkind: NodeAllocation\nmetadata:\n  name: node-1\nspec:\n  pods: []\n' >"$WORK/a.yaml"
  "${agent[@]}" || { echo "FAIL: the agent image's restoring pass"; exit 1; }
  [ "$(cat "$pod/cpu.cfs_quota_us")" = 200000 ] || { echo "FAIL: quota not restored"; exit 1; }
  echo "image_test: the agent image set the quota to 50000 and restored 200000"
}

trainer() {
  local out
  out=$("${RUN[@]}" "localhost/star-trainer:$TAG" --world 1 --max-iterations 5 --no-eval --log-every 1 2>&1) ||
    { echo "$out" | tail -20; echo "FAIL: the trainer image"; exit 1; }
  echo "$out" | tail -3
  echo "$out" | grep -q "iteration" || { echo "FAIL: no iterations logged"; exit 1; }
}

clean() {
  for target in operator agent trainer; do "${PODMAN[@]}" rmi -f "localhost/star-$target:$TAG" >/dev/null 2>&1 || true; done
  "${PODMAN[@]}" rmi -f "$BASE" >/dev/null 2>&1 || true
  "${PODMAN[@]}" image prune -f >/dev/null 2>&1 || true  # the builder's intermediate layers
  echo "image_test: removed the images"
}

case "${1:-}" in
  build | operator | agent | trainer | clean) "$1" ;;
  *) echo "usage: $0 build|operator|agent|trainer|clean" >&2; exit 2 ;;
esac
