#!/bin/sh
# Runs promtool with the arguments given (ctest -L alerts). Without promtool (Debian's
# package prometheus) it says so and exits 77, which ctest reports as a skip.
if ! command -v promtool >/dev/null 2>&1; then
  echo "SKIPPED: promtool not found (apt-get install prometheus)"
  exit 77
fi
exec promtool "$@"
