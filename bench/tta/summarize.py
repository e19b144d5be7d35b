#!/usr/bin/env python3
"""Summarizes measure.sh's runs: per scenario and policy, the TTA median (min-max) of the
rounds, each run's mode decisions (from its report's timeline) and iterations.

    /usr/bin/python3 bench/tta/summarize.py bench/tta/out
"""
import glob, json, os, statistics, sys


def cell(paths):
    runs = [json.load(open(p)) for p in paths if os.path.exists(p)]
    t = [r["tta_seconds"] for r in runs if r["tta_seconds"] is not None]
    if not t:
        return "-"
    modes = [sum(1 for e in r["timeline"] if e["event"] == "mode") for r in runs]
    iters = [r["iterations"] for r in runs]
    return (f"{statistics.median(t):.1f} ({min(t):.1f}-{max(t):.1f}); "
            f"decisions {', '.join(map(str, modes))}; iterations {', '.join(map(str, iters))}")


base = sys.argv[1]
rounds = sorted(glob.glob(f"{base}/run*"))
print(f"clean ssgd: {cell(sorted(glob.glob(f'{base}/clean/run*/runs/clean-ssgd.json')))}")
for sc in ("neighbor", "bandwidth", "two"):
    for pol in ("ssgd", "auto", "fixed-k", "groups"):
        print(f"{sc} {pol}: {cell([f'{r}/runs/{sc}-{pol}.json' for r in rounds])}")
