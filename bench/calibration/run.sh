#!/usr/bin/env bash
# Replays the calibration of star sim against the testbed matrix of bench/tta/results.md
# (the fitted scenarios in bench/calibration/data/), fitting the progress parameters again.
#   bash bench/calibration/run.sh [--out DIR]     (default: bench/calibration/out/)
. "$(dirname "$0")/../lib.sh"
build star
/usr/bin/python3 bench/calibration/calibrate.py --star "$BUILD/cli/star" \
    --replay bench/calibration/data --fit neighbor,bandwidth,two --out bench/calibration/out "$@"
