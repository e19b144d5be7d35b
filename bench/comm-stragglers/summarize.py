#!/usr/bin/env python3
"""Summarizes bench/comm-stragglers/run.sh's rounds: per scenario and policy the TTA median
(min-max), each run's decisions, the first communication straggler flag (time after the
injection, worker) and reallocations; then Korel's offset per scenario,
(TTA_ssgd,contended - TTA_auto) / (TTA_ssgd,contended - TTA_ssgd,clean), of the medians.

    /usr/bin/python3 bench/comm-stragglers/summarize.py bench/comm-stragglers/out
"""
import glob, json, os, statistics, sys

START = 5.0  # the injections' start


def runs(paths):
    return [json.load(open(p)) for p in paths if os.path.exists(p)]


def first_flag(r):
    for e in r["timeline"]:
        if e["event"] == "straggler" and "cause=communication" in e.get("detail", ""):
            return f"w{e['worker']} +{e['t'] - START:.1f}s"
    return "none"


def cell(rs):
    t = [r["tta_seconds"] for r in rs if r["tta_seconds"] is not None]
    if not t:
        return None, "-"
    modes = [sum(1 for e in r["timeline"] if e["event"] == "mode") for r in rs]
    realloc = [sum(1 for e in r["timeline"] if e["event"] == "reallocate") for r in rs]
    flags = [first_flag(r) for r in rs]
    med = statistics.median(t)
    return med, (f"{med:.1f} ({min(t):.1f}-{max(t):.1f}); decisions {', '.join(map(str, modes))}; "
                 f"reallocations {', '.join(map(str, realloc))}; first flag {', '.join(flags)}")


base = sys.argv[1]
rounds = sorted(glob.glob(f"{base}/run*"))
clean, text = cell(runs(sorted(glob.glob(f"{base}/clean/run*/runs/clean-ssgd.json"))))
print(f"clean ssgd: {text}")
for sc in ("bwneighbor", "bandwidth"):
    med = {}
    for pol in ("ssgd", "auto"):
        med[pol], text = cell(runs([f"{r}/runs/{sc}-{pol}.json" for r in rounds]))
        print(f"{sc} {pol}: {text}")
    if clean is not None and None not in med.values() and med["ssgd"] > clean:
        print(f"{sc} offset: {(med['ssgd'] - med['auto']) / (med['ssgd'] - clean):.0%}")
