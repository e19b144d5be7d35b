#!/usr/bin/env bash
# Builds tests/helm/render (Go, GOPATH mode, offline) into OUT_BINARY from Debian's Go
# sources: golang-go, golang-github-masterminds-sprig-dev, golang-gopkg-yaml.v2-dev,
# golang-github-xeipuuv-gojsonschema-dev (all under /usr/share/gocode).
#
#   tests/helm/build-render.sh OUT_BINARY
#
# Debian ships sprig v3 and semver v3 under their v1 import paths; a GOPATH next to
# OUT_BINARY maps github.com/Masterminds/{sprig,semver}/v3 onto them.
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_BINARY" >&2
  exit 2
fi
out=$(realpath -m "$1")
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/render" && pwd)
gocode=/usr/share/gocode/src
for dir in github.com/Masterminds/sprig github.com/Masterminds/semver gopkg.in/yaml.v2 \
           github.com/xeipuuv/gojsonschema; do
  if [[ ! -d $gocode/$dir ]]; then
    echo "$0: $gocode/$dir is missing (apt-get install golang-github-masterminds-sprig-dev" \
         "golang-gopkg-yaml.v2-dev golang-github-xeipuuv-gojsonschema-dev)" >&2
    exit 1
  fi
done
gopath=$(dirname "$out")/render-gopath
mkdir -p "$gopath/src/github.com/Masterminds/sprig" "$gopath/src/github.com/Masterminds/semver"
ln -sfn "$gocode/github.com/Masterminds/sprig" "$gopath/src/github.com/Masterminds/sprig/v3"
ln -sfn "$gocode/github.com/Masterminds/semver" "$gopath/src/github.com/Masterminds/semver/v3"
cd "$src"
GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOCACHE="$gopath/cache" GOFLAGS= \
  go build -o "$out" .
