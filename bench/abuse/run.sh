#!/usr/bin/env bash
# The abuse suite's numbers: tests/k8s/abuse_test.py (ctest star_k8s_abuse, with its
# cluster fixture) run twice, each printing its numbers as one JSON line: first without
# attacks (the victim job's baseline time to its target), then with them (the flood's
# requests and answers, the operator's peak memory against the chart's limit, the victim's
# time under attack). Needs root and the k8s tools (as the k8s tests do).
#
#   bash bench/abuse/run.sh          STAR_ABUSE_FLOOD_SECONDS, STAR_ABUSE_FLOOD_RATE
#                                    (default 60 s at 1000 reports a second)
source "$(dirname "$0")/../lib.sh"
build star-operator star-agent star-fmnist
OUT=$(mktemp /tmp/star-abuse.XXXXXX)
trap 'rm -f "$OUT"' EXIT
for attacks in 0 1; do
  STAR_ABUSE_ATTACKS=$attacks STAR_ABUSE_RESULTS=$OUT \
    ctest --test-dir "$BUILD" -R '^star_k8s_abuse$' --output-on-failure >&2
  if [ "$attacks" = 0 ]; then echo "without attacks:"; else
    echo "with attacks (flood ${STAR_ABUSE_FLOOD_RATE:-1000}/s for ${STAR_ABUSE_FLOOD_SECONDS:-60} s, 32 connections):"
  fi
  cat "$OUT"
done
