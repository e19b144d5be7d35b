#!/usr/bin/env python3
"""Summarizes measure.sh's runs: per loop build and scenario, the TTA median (min-max),
each run's mode changes (from its report's timeline), its returns to SSGD and iterations.

    bench/tta/results-unflagged/summarize.py bench/tta/results-unflagged
"""
import json, glob, statistics, sys, os
base = sys.argv[1]
for build in ("before", "after"):
    for sc in ("two", "neighbor"):
        rows = []
        for n in range(1, 6):
            p = f"{base}/{build}/run{n}/runs/{sc}-auto.json"
            if not os.path.exists(p): continue
            r = json.load(open(p))
            modes = [e for e in r["timeline"] if e["event"] == "mode"]
            back = sum(1 for e in modes if e["detail"].startswith("ssgd"))
            seq = " > ".join(f'{e["detail"].split(" [")[0]}@{e["t"]:.1f}' for e in modes)
            rows.append((r["tta_seconds"], r["iterations"], len(modes), back, seq))
        t = [x[0] for x in rows if x[0] is not None]
        if not t: continue
        print(f"{build} {sc}: median {statistics.median(t):.1f} ({min(t):.1f}-{max(t):.1f}) n={len(t)}; "
              f"mode changes {[x[2] for x in rows]}; back to ssgd {[x[3] for x in rows]}; iters {[x[1] for x in rows]}")
        for x in rows: print("   ", f"{x[0]:.1f}s", x[4])
cl = [json.load(open(p))["tta_seconds"] for p in sorted(glob.glob(f"{base}/clean/run*/runs/clean-ssgd.json"))]
print("clean ssgd:", f"{statistics.median(cl):.1f} ({min(cl):.1f}-{max(cl):.1f}) n={len(cl)}")
