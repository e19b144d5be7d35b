#!/usr/bin/env bash
# The images the Dockerfile builds and the names they go by, REGISTRY/NAME:TAG. The
# registry is set here and nowhere else: these builds are tagged with it, the chart's
# image.registry defaults to it, and the example and benchmark jobs name images under it
# (tests/repo/images_test.py fails when any of them names an image not listed here).
#   bash scripts/images.sh list                 TARGET REFERENCE, one line per image
#   bash scripts/images.sh build [ARG...]       builds every target under its name (ARGs go
#                                               to each `build`, e.g. --build-arg ...)
#   bash scripts/images.sh push                 pushes them
# Environment: STAR_REGISTRY (default ghcr.io/star-dev) builds under another registry (run
# the chart with the same --set image.registry=...); STAR_CONTAINER_TOOL (default podman
# when installed, else docker).
set -euo pipefail

REGISTRY=${STAR_REGISTRY:-ghcr.io/star-dev}
# Dockerfile target, image name, tag. The operator's and agent's names are the chart's
# operator.imageName and agent.imageName, their tag its appVersion (the project version);
# trainer is the image the example TrainingJobs' workers run (star-fmnist, star.torch with
# PyTorch, examples/pytorch/train_fmnist.py); trainer-cuda the GPU example's (star.torch
# with NCCL, PyTorch with CUDA, torchrun).
IMAGES=(
  "operator star-operator 0.1.0"
  "agent star-agent 0.1.0"
  "trainer fmnist 0.1"
  "trainer-cuda fmnist-cuda 0.1"
)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

list() {
  local target name tag
  for entry in "${IMAGES[@]}"; do
    read -r target name tag <<<"$entry"
    echo "$target ${REGISTRY%/}/$name:$tag"
  done
}

tool() {
  if [ -n "${STAR_CONTAINER_TOOL:-}" ]; then echo "$STAR_CONTAINER_TOOL"
  elif command -v podman >/dev/null; then echo podman
  else echo docker; fi
}

case "${1:-}" in
  list) list ;;
  build)
    shift
    while read -r target ref; do
      echo "images.sh: building $ref (target $target)"
      "$(tool)" build --target "$target" -t "$ref" "$@" -f "$ROOT/Dockerfile" "$ROOT" </dev/null
    done < <(list)
    ;;
  push) while read -r _ ref; do "$(tool)" push "$ref" </dev/null; done < <(list) ;;
  *) echo "usage: $0 list|build [BUILD ARG...]|push" >&2; exit 2 ;;
esac
