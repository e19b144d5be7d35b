#!/usr/bin/env bash
# The container images (Dockerfile) built and run with podman, as root:
#   build     the three targets, on a base image made from Debian's archive (mmdebstrap);
#             the builder stage is built once (tagged) and reused by the three targets
#   operator  the operator image on the host network against the real API server (the
#             k8s_cluster fixture's cluster), watching a namespace of its own: a
#             TrainingJob applied with kubectl becomes pods, and deleting it releases it
#   agent     the agent image with the host's cgroup hierarchy: a NodeAllocation file
#             (YAML) sets a test cgroup's CPU quota, and an empty one restores it
#   trainer   the trainer image, by the name the example jobs give it (scripts/images.sh:
#             ghcr.io/star-dev/fmnist:0.1), trains a few iterations on Fashion-MNIST:
#             star-fmnist, and the PyTorch example (examples/pytorch) through star.torch
#   clean     removes everything the others made
# Usage: image_test.sh build|operator|agent|trainer|clean  (build first; the others reuse
# its images; clean last)
# Environment: STAR_SOURCE_DIR; for `operator`, KUBECONFIG (a cluster admin's, its
# certificate files named by absolute path, as scripts/cluster.sh writes it) and
# STAR_KUBECTL; and STAR_IMAGE_STATE: the directory that holds everything the tests make
# (podman's storage, images and containers, the base tarball, the build context, logs), so
# that nothing outside it is touched but the test cgroups, podman's run root and the
# operator's namespace, and removing it removes them all. Podman's run root (its transient
# state: locks, mounts, container run files) is /tmp/star-img-ID (ID: a hash of
# STAR_IMAGE_STATE), since podman refuses a run root over 50 characters and the build
# directory may be deeper. `build` starts by removing what a killed earlier run left;
# `clean` removes it all.
# Runs by default; STAR_IMAGE_TESTS=0 skips it (exit 77), as do a user other than root and a
# missing podman, runc or mmdebstrap (scripts/install-deps.sh installs them).
set -euo pipefail

skip() { echo "SKIPPED: $*"; exit 77; }
[ "${STAR_IMAGE_TESTS:-1}" != 0 ] || skip "STAR_IMAGE_TESTS=0"
[ "$(id -u)" = 0 ] || skip "needs root (podman build --isolation chroot, a test cgroup)"
for tool in podman runc mmdebstrap; do
  command -v $tool >/dev/null ||
    skip "$tool is not installed (bash scripts/install-deps.sh installs podman, runc and mmdebstrap)"
done

SRC=${STAR_SOURCE_DIR:?}
STATE=${STAR_IMAGE_STATE:?}
case "$STATE" in /*/*) ;; *) echo "STAR_IMAGE_STATE must be an absolute path below /: '$STATE'" >&2; exit 2 ;; esac
# Names outside STATE (cgroups, the run root) carry this, so that two build directories do
# not collide.
ID=$(printf %s "$STATE" | md5sum | cut -c1-8)
TAG=test
BASE=localhost/star-test-debian:bookworm
BUILDER=localhost/star-build:$TAG
CGROUP=star-image-test-$ID
# Podman's transient state, in a short path (podman wants its run root under 50 characters);
# its libpod tmpdir (container sockets, exit files) goes there too.
RUNDIR=/tmp/star-img-$ID
PODMAN=(podman --root "$STATE/storage" --runroot "$RUNDIR/run" --tmpdir "$RUNDIR/tmp"
  --runtime runc --cgroup-manager cgroupfs)
RUN_OPTS=(--cgroup-parent "/$CGROUP/containers" --ulimit nofile=1024:1024 --ulimit nproc=1024:1024
  --network host)
RUN=("${PODMAN[@]}" run --rm "${RUN_OPTS[@]}")
# For a container whose log a failure shows: kept after it exits (remove_container removes it).
RUN_KEPT=("${PODMAN[@]}" run "${RUN_OPTS[@]}")

# Removes the cgroups below CGROUP that no process is in: the containers' (podman's cgroupfs
# manager leaves conmon's behind) and the agent's test cgroup.
remove_cgroups() {
  local h
  for h in /sys/fs/cgroup/*/"$CGROUP"; do
    [ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

remove_container() {
  "${PODMAN[@]}" rm --force --time 0 "$1" >/dev/null 2>&1 || true
  remove_cgroups
}

# Removes everything below STATE and RUNDIR (containers, images, mounts, files) and the test
# cgroups.
purge() {
  if [ -d "$STATE/storage" ]; then
    "${PODMAN[@]}" rm --all --force --time 0 >/dev/null 2>&1 || true
    "${PODMAN[@]}" rmi --all --force >/dev/null 2>&1 || true
  fi
  # Mounts a killed run may have left (image layers, containers' shm, mmdebstrap's /proc and
  # /dev), deepest first.
  local m d
  findmnt -rn -o TARGET | awk -v p="$STATE/" -v r="$RUNDIR/" 'index($0, p) == 1 || index($0, r) == 1' |
    sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  for d in "$STATE" "$RUNDIR"; do
    rm -rf --one-file-system "$d" 2>/dev/null || rm -rf --one-file-system "$d" || true
  done
  remove_cgroups
  for d in "$STATE" "$RUNDIR"; do
    [ ! -e "$d" ] || { echo "image_test: could not remove $d"; return 1; }
  done
  local h
  for h in /sys/fs/cgroup/*/"$CGROUP"; do
    [ ! -d "$h" ] || { echo "image_test: could not remove the cgroup $h"; return 1; }
  done
}

case "${1:-}" in
  build | operator | agent | trainer | clean) ;;
  *) echo "usage: $0 build|operator|agent|trainer|clean" >&2; exit 2 ;;
esac
# What a killed earlier run left.
[ "$1" != build ] || purge
# This run's files, removed when it ends; CLEANUP's commands run then too, last first.
mkdir -p "$STATE/tmp"
WORK=$(mktemp -d "$STATE/work-$1-XXXXXX")
CLEANUP=()
cleanup() {
  local i
  for ((i = ${#CLEANUP[@]} - 1; i >= 0; i--)); do eval "${CLEANUP[i]}" || true; done
  rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# The builder's compiler cache (the Dockerfile uses one mounted at /ccache): kept between
# runs, by content, so a later run recompiles only what changed.
CCACHE_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/star/image-ccache

# Runs `podman build` with a log whose lines start with the seconds since it started; prints
# when each step started, and the log's last lines on failure.
podman_build() {
  local name=$1; shift
  local start=$SECONDS log=$STATE/build-$name.log line
  "${PODMAN[@]}" build --layers --isolation chroot --network host --volume "$CCACHE_DIR:/ccache" \
    --build-arg BUILD_IMAGE="$BASE_PINNED" --build-arg BASE_IMAGE="$BASE_PINNED" \
    -f "$CTX/Dockerfile" "$@" "$CTX" 2>&1 |
    while IFS= read -r line; do printf '%4d %s\n' $((SECONDS - start)) "$line"; done >"$log" ||
    { tail -50 "$log"; echo "FAIL: podman build ($name)"; exit 1; }
  grep -E '^ *[0-9]+ (\[[0-9/]+\] )?(STEP|--> Using cache)' "$log" | cut -c1-110 | sed 's/^/  /'
  echo "image_test: built $name in $((SECONDS - start)) s"
}

build() {
  local start=$SECONDS
  # One copy of the sources is the context of every build: the builder stage's layers are
  # then reused by the three targets (its COPY is cached by content), and the binaries all
  # come from the same sources even if the tree changes meanwhile. .dockerignore still applies.
  CTX=$STATE/context
  mkdir "$CTX"
  mkdir -p "$CCACHE_DIR"
  tar -C "$SRC" --exclude=./.git --exclude='./build*' --exclude=./out -cf - . | tar -C "$CTX" -xf -

  # The base image: Debian's minbase from the archive (no registry is reachable).
  local t=$SECONDS
  TMPDIR=$STATE/tmp mmdebstrap --quiet --variant=minbase bookworm "$WORK/base.tar"
  "${PODMAN[@]}" import "$WORK/base.tar" "$BASE" >/dev/null
  rm -f "$WORK/base.tar"
  # Built on by digest, as the Dockerfile's defaults are: the image just made, not whatever
  # the tag names by the time a stage starts.
  BASE_PINNED=${BASE%:*}@$("${PODMAN[@]}" image inspect --format '{{.Digest}}' "$BASE")
  echo "image_test: made $BASE_PINNED with mmdebstrap in $((SECONDS - t)) s"

  # The builder stage once (apt and the compile), then the targets on its cached layers,
  # each also under the name scripts/images.sh gives it (the name the chart and the example
  # jobs use).
  podman_build builder --target build -t "$BUILDER"
  local target ref
  for target in operator agent trainer; do
    ref=$(published "$target")
    podman_build "star-$target" --target "$target" -t "localhost/star-$target:$TAG" -t "$ref"
    "${PODMAN[@]}" image exists "$ref" || { echo "FAIL: star-$target is not tagged $ref"; exit 1; }
    grep -A1 "STEP.*RUN .*cmake -S" "$STATE/build-star-$target.log" | grep -q "Using cache" ||
      { echo "FAIL: star-$target compiled again instead of reusing the builder's layers"; exit 1; }
    echo "image_test: star-$target is" \
      "$("${PODMAN[@]}" image inspect --format '{{.Size}}' "localhost/star-$target:$TAG") bytes"
  done
  # The operator runs as a non-root user.
  local user
  user=$("${PODMAN[@]}" image inspect --format '{{.Config.User}}' "localhost/star-operator:$TAG")
  [ "$user" = "65532:65532" ] || { echo "FAIL: the operator image runs as '$user'"; exit 1; }
  echo "image_test: built the three images in $((SECONDS - start)) s"
}

# The name scripts/images.sh builds Dockerfile target $1 under (REGISTRY/NAME:TAG).
published() {
  local ref
  ref=$(env -u STAR_REGISTRY bash "$SRC/scripts/images.sh" list | awk -v t="$1" '$1 == t {print $2}')
  [ -n "$ref" ] || { echo "FAIL: scripts/images.sh lists no image for the target $1"; exit 1; }
  echo "$ref"
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

# The operator's namespace: its TrainingJobs deleted while the operator still runs (it
# removes its finalizer; one left, by a failed run, is removed by hand), then the namespace.
delete_jobs() {
  "${KUBECTL[@]}" delete tj --all -n "$1" --timeout=60s >/dev/null 2>&1 && return 0
  local tj
  for tj in $("${KUBECTL[@]}" get tj -n "$1" -o name 2>/dev/null); do
    "${KUBECTL[@]}" patch -n "$1" "$tj" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
  done
  return 1
}

delete_namespace() {
  delete_jobs "$1" || true
  "${KUBECTL[@]}" delete namespace "$1" --timeout=120s >/dev/null 2>&1 ||
    echo "image_test: the namespace $1 was not deleted within 120 s"
}

# The last lines of container $1's log, and its state.
operator_log() {
  { "${PODMAN[@]}" logs "$1" 2>&1 | tail -30; } || true
  "${PODMAN[@]}" inspect --format 'container {{.Name}}: {{.State.Status}}, exit code {{.State.ExitCode}}' "$1" 2>&1 || true
}

operator() {
  local kc=${KUBECONFIG:?the kubeconfig of the k8s_cluster fixture}
  KUBECTL=("${STAR_KUBECTL:?}" --kubeconfig "$kc" --cache-dir "$WORK/cache")
  "${KUBECTL[@]}" get --raw /readyz >/dev/null || { echo "FAIL: the API server of $kc is not ready"; exit 1; }
  # The kubeconfig and the certificate files it names, copied into one folder mounted at
  # /etc/star/kube (the host's paths may be unreachable to the image's user, e.g. under
  # /root), the kubeconfig rewritten to name the copies; each readable by the image's user
  # (65532) alone, as the client key is root's alone.
  local f i=0 conf=$WORK/files/kubeconfig
  mkdir "$WORK/files"
  cp "$kc" "$conf"
  for f in $(sed -n -E 's/^ *(certificate-authority|client-certificate|client-key): *//p' "$kc"); do
    case "$f" in /*) ;; *) echo "FAIL: $kc names $f by a relative path"; exit 1 ;; esac
    install -o 65532 -g 65532 -m 0400 "$f" "$WORK/files/$i"
    sed -i "s|: *$f\$|: /etc/star/kube/$i|" "$conf"
    i=$((i + 1))
  done
  chown 65532:65532 "$conf"
  chmod 0400 "$conf"
  local mounts=(-v "$WORK/files:/etc/star/kube:ro")
  # A namespace of this test's own, which the operator watches.
  local ns
  ns=star-image-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
  "${KUBECTL[@]}" create namespace "$ns" >/dev/null
  CLEANUP+=("delete_namespace $ns")
  # Pods need the namespace's default ServiceAccount, which the controller manager makes.
  eventually 60 "${KUBECTL[@]}" get serviceaccount default -n "$ns" >/dev/null 2>&1 ||
    { echo "FAIL: no default ServiceAccount in $ns"; exit 1; }
  local name=star-operator-$ID
  CLEANUP+=("remove_container $name")
  "${RUN_KEPT[@]}" -d --name "$name" "${mounts[@]}" "localhost/star-operator:$TAG" --kubeconfig /etc/star/kube/kubeconfig \
    --namespace "$ns" --report-listen 127.0.0.1:0 --metrics-listen "" >/dev/null
  # Deletes the job while the operator runs (the cleanup's first step when the test fails).
  CLEANUP+=("delete_jobs $ns")
  sed -e 's/replicas: 4/replicas: 2/' -e '/^  namespace: /d' "$SRC/examples/fmnist-job.yaml" |
    "${KUBECTL[@]}" apply -n "$ns" -f - >/dev/null
  local job
  job=$("${KUBECTL[@]}" get tj -n "$ns" -o jsonpath='{.items[0].metadata.name}')
  pods() { [ "$("${KUBECTL[@]}" get pods -n "$ns" -l "star.dev/job=$job" -o name | wc -l)" -ge 2 ]; }
  eventually 60 pods || { operator_log "$name"; echo "FAIL: no pods"; exit 1; }
  echo "image_test: the operator image made the pods of $job in $ns:" \
    $("${KUBECTL[@]}" get pods -n "$ns" -o name)
  delete_jobs "$ns" || { operator_log "$name"; echo "FAIL: $job was not deleted (its finalizer)"; exit 1; }
  echo "image_test: deleting $job, the operator released it"
}

agent() {
  local uid=5b1e7c3a-9d2f-4e6b-8a1c-3f5d7e9b0a2c root=$CGROUP/agent cpu=/sys/fs/cgroup/cpu
  [ -f $cpu/cpu.cfs_quota_us ] || skip "no cgroup v1 cpu hierarchy at $cpu"
  local pod=$cpu/$root/kubepods/burstable/pod$uid
  CLEANUP+=(remove_cgroups)
  mkdir -p "$pod"
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
  CLEANUP+=("remove_cgroups")
  # By the name the example TrainingJobs give it.
  local out image
  image=$(published trainer)
  out=$("${RUN[@]}" "$image" --world 1 --max-iterations 5 --no-eval --log-every 1 2>&1) ||
    { echo "$out" | tail -20; echo "FAIL: the trainer image"; exit 1; }
  echo "$out" | tail -3
  echo "$out" | grep -q "iteration" || { echo "FAIL: no iterations logged"; exit 1; }
  # The plain PyTorch script of examples/pytorch, through star.torch, as a lone worker.
  out=$("${RUN[@]}" -e STAR_RANK=0 -e STAR_WORLD_SIZE=1 --entrypoint /usr/bin/python3 \
        "$image" examples/pytorch/train_fmnist.py --max-iterations 4 \
        --eval-every 2 --eval-samples 200 2>&1) ||
    { echo "$out" | tail -20; echo "FAIL: the trainer image's PyTorch example"; exit 1; }
  echo "$out" | tail -2
  echo "$out" | grep -q "accuracy" || { echo "FAIL: the PyTorch example logged no evaluation"; exit 1; }
}

clean() {
  local start=$SECONDS
  purge
  echo "image_test: removed the images, the containers, $STATE, $RUNDIR and the test cgroups" \
    "in $((SECONDS - start)) s"
}

"$1"
