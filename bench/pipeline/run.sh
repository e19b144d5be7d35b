#!/usr/bin/env bash
# A 4-stage pipeline under `star local` (as root), in two parts that results.md records:
#   depths  fixed warm-up depths, clean and with stage 1's uplink slowed (depths.sh)
#   adapt   the control loop adapting the depths around one slow link, ssgd against auto
#           (adapt.sh)
#   sim     `star sim` of the adapt runs, from their clean stages' costs (sim.sh)
#   bench/run pipeline [depths|adapt|sim] [ARGS...]   (every part, default arguments, without a part)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
case "${1:-}" in
  depths | adapt | sim) part=$1; shift; exec bash "$HERE/$part.sh" "$@" ;;
  "") bash "$HERE/depths.sh"; bash "$HERE/adapt.sh"; bash "$HERE/sim.sh" ;;
  *) echo "bench/run pipeline: no part '$1' (depths, adapt or sim)" >&2; exit 2 ;;
esac
