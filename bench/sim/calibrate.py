#!/usr/bin/env python3
"""Calibrates `star sim` against the straggler testbed (bench/tta/tta_bench).

Each testbed run (a tta_bench OUT/runs/<scenario>-<policy>.json report, with its
samples[]) becomes a simulator scenario fitted from that report:
  - compute_seconds_per_sample and communication_seconds from the clean SSGD runs: the
    median iteration period minus the median communication, per sample, and the median
    communication (so per-iteration overheads such as data loading count as compute);
  - jitter: the clean runs' robust spread of compute per sample (1.4826 MAD / median);
  - episodes: for each injected worker, its speed in every stretch of the injection
    window, cut at the run's own reallocations (the simulator does not reallocate): the
    slower of two readings, the clean iteration's compute part over the worker's own
    median iteration period there less the clean communication (its period understates
    the slowdown where a mode lets it skip rounds, as fixed-k does), and the clean
    compute per sample over its median compute per sample there (which understates it
    where the rest of the iteration slows more than forward and backward);
    bandwidth injections: the clean communication over its median communication there;
  - the progress target: min_updates (1 + noise_scale / 256) = the clean SSGD runs'
    median iterations to the target, with noise_scale and staleness_penalty chosen on
    the --fit scenarios (a grid, least squares of log(simulated / measured TTA)).
The simulation starts at the run's first iteration; its TTA is compared with the run's
TTA less that start. Prints the fitted parameters, one row per run and the per-cell
medians with the policy ranking per scenario (markdown), and writes the scenarios to
--out.

Usage:
  bench/sim/calibrate.py --star build/cli/star --clean DIR... --runs DIR... \
                         [--fit neighbor] [--out DIR]
where each DIR is a tta_bench --out directory (its runs/*.json are read).
"""
import argparse
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys

GLOBAL_BATCH = 256
PHI_GRID = [0, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 65536]
PENALTY_GRID = [0, 0.1, 0.3, 1.0, 3.0, 10.0]


def reports(dirs, scenario=None):
    out = []
    for d in dirs:
        for f in sorted(glob.glob(os.path.join(d, "runs", "*.json"))):
            with open(f) as fh:
                r = json.load(fh)
            name = os.path.basename(f)[: -len(".json")]
            r["_scenario"], r["_policy"] = name.split("-", 1)
            r["_file"] = f
            if r.get("tta_seconds") is not None and (scenario is None or r["_scenario"] == scenario):
                out.append(r)
    return out


def start_time(r):
    return min(s["t"] for s in r["samples"])


def iterations_to_target(r):
    return max(s["iteration"] for s in r["samples"] if s["worker"] == 0 and s["t"] <= r["tta_seconds"])


def period(samples):
    """Median seconds per iteration over consecutive samples of one worker."""
    pts = sorted((s["iteration"], s["t"]) for s in samples)
    return statistics.median((b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(pts, pts[1:]) if b[0] > a[0])


def fit_clean(clean):
    periods, comms, per_sample, iters = [], [], [], []
    for r in clean:
        periods.append(period([s for s in r["samples"] if s["worker"] == 0]))
        comms += [s["communication_seconds"] for s in r["samples"]]
        per_sample += [s["compute_seconds"] / s["batch"] for s in r["samples"]]
        iters.append(iterations_to_target(r))
    med = statistics.median(per_sample)
    mad = statistics.median(abs(x - med) for x in per_sample)
    comm = statistics.median(comms)
    return {
        "compute_seconds_per_sample": (statistics.median(periods) - comm) / (GLOBAL_BATCH / 4),
        "communication_seconds": comm,
        "jitter": min(1.0, 1.4826 * mad / med),
        "raw_compute_per_sample": med,
        "iterations": statistics.median(iters),
    }


def parse_injection(spec):
    fields = dict(kv.split("=", 1) for kv in spec.split(","))
    secs = lambda v: float(re.sub(r"s$", "", v))
    return {
        "worker": int(fields["worker"]),
        "start": secs(fields.get("start", "0s")),
        "end": secs(fields["end"]) if "end" in fields else None,
        "kind": "bandwidth" if "bandwidth" in fields else "cpu",
    }


def episodes(r, clean):
    """The injected workers' fitted speeds, in simulated time (from the first iteration)."""
    t0 = start_time(r)
    out = []
    for spec in r.get("injections", []):
        inj = parse_injection(spec)
        w = inj["worker"]
        cuts = [inj["start"]] + sorted(
            e["t"] for e in r["timeline"]
            if e["event"].startswith("reallocate") and e.get("worker") in (w, str(w), f"worker {w}")
            and e["t"] > inj["start"] and (inj["end"] is None or e["t"] < inj["end"]))
        ends = cuts[1:] + [inj["end"]]
        for a, b in zip(cuts, ends):
            mine = [s for s in r["samples"] if s["worker"] == w and s["t"] >= a and (b is None or s["t"] < b)]
            if len(mine) < 3:
                continue
            if inj["kind"] == "cpu":
                by_period = clean["compute_seconds_per_sample"] * GLOBAL_BATCH / 4 / max(
                    1e-9, period(mine) - clean["communication_seconds"])
                by_compute = clean["raw_compute_per_sample"] / statistics.median(
                    s["compute_seconds"] / s["batch"] for s in mine)
                keep = min(1.0, by_period, by_compute)
            else:
                slow = statistics.median(s["communication_seconds"] for s in mine)
                keep = min(1.0, clean["communication_seconds"] / slow)
            e = {"worker": w, "start": max(0.0, a - t0), inj["kind"]: round(keep, 4)}
            if b is not None:
                e["end"] = max(e["start"] + 0.01, b - t0)
            out.append(e)
    return out


def scenario(r, clean, phi, penalty):
    return {
        "architecture": "AllReduce", "workers": 4, "batch_per_worker": GLOBAL_BATCH // 4,
        "noise_scale": phi, "min_updates": clean["iterations"] / (1 + phi / GLOBAL_BATCH),
        "compute_seconds_per_sample": clean["compute_seconds_per_sample"],
        "communication_seconds": clean["communication_seconds"], "jitter": clean["jitter"],
        "episodes": episodes(r, clean), "staleness_penalty": penalty, "seed": 1,
    }


def simulate(star, scen, policy, cache={}):
    key = (json.dumps(scen, sort_keys=True), policy)
    if key not in cache:
        out = subprocess.run([star, "sim", "-", "--policy", policy], input=json.dumps(scen),
                             capture_output=True, text=True, check=True)
        cache[key] = json.loads(out.stdout)["results"][0]["tta_seconds"]
    return cache[key]


def fit_progress(star, runs, clean):
    best = None
    for phi in PHI_GRID:
        for penalty in PENALTY_GRID:
            err = 0.0
            for r in runs:
                sim = simulate(star, scenario(r, clean, phi, penalty), r["_policy"])
                measured = r["tta_seconds"] - start_time(r)
                err += math.log((sim if sim else 1e9) / measured) ** 2
            if best is None or err < best[0]:
                best = (err, phi, penalty)
    return best[1], best[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--star", required=True)
    ap.add_argument("--clean", nargs="+", required=True)
    ap.add_argument("--runs", nargs="+", required=True)
    ap.add_argument("--fit", default="neighbor", help="scenario(s) the progress parameters are chosen on")
    ap.add_argument("--out")
    a = ap.parse_args()
    clean_runs = reports(a.clean, "clean")
    if not clean_runs:
        sys.exit("calibrate.py: no clean run with a TTA in --clean")
    clean = fit_clean(clean_runs)
    runs = [r for r in reports(a.runs) if r["_scenario"] != "clean"]
    fit_on = [r for r in runs if r["_scenario"] in a.fit.split(",")]
    phi, penalty = fit_progress(a.star, fit_on, clean)
    print(f"clean fit ({len(clean_runs)} runs): " + ", ".join(f"{k} {v:.5g}" for k, v in clean.items()))
    print(f"progress fit on {a.fit} ({len(fit_on)} runs): noise_scale {phi}, staleness_penalty {penalty}\n")
    cells = {}
    print("| run | measured TTA (s) | simulated (s) | sim / measured |\n|---|---|---|---|")
    for r in runs:
        scen = scenario(r, clean, phi, penalty)
        t0 = start_time(r)
        sim = simulate(a.star, scen, r["_policy"])
        sim_tta = sim + t0 if sim is not None else None
        cells.setdefault((r["_scenario"], r["_policy"]), []).append((r["tta_seconds"], sim_tta))
        ratio = f"{sim_tta / r['tta_seconds']:.2f}" if sim_tta else "-"
        print(f"| {os.path.relpath(r['_file'])} | {r['tta_seconds']:.1f} | "
              f"{sim_tta if sim_tta is None else round(sim_tta, 1)} | {ratio} |")
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            # <tta_bench out dir>-<scenario>-<policy>.json
            name = os.path.basename(os.path.dirname(os.path.dirname(r["_file"]))) + "-" + os.path.basename(r["_file"])
            with open(os.path.join(a.out, name), "w") as fh:
                json.dump(scen, fh, indent=1)
    print("\n| scenario | policy | runs | measured median (s) | simulated median (s) | difference |")
    print("|---|---|---|---|---|---|")
    ranking = {}
    for (s, p), v in sorted(cells.items()):
        m = statistics.median(x for x, _ in v)
        sims = [y for _, y in v if y is not None]
        sm = statistics.median(sims) if sims else None
        ranking.setdefault(s, []).append((p, m, sm))
        diff = f"{(sm / m - 1) * 100:+.0f}%" if sm else "-"
        print(f"| {s}{' (fit)' if s in a.fit.split(',') else ''} | {p} | {len(v)} | {m:.1f} | "
              f"{'-' if sm is None else round(sm, 1)} | {diff} |")
    print()
    for s, rows in ranking.items():
        by_m = [p for p, m, _ in sorted(rows, key=lambda x: x[1])]
        by_s = [p for p, _, sm in sorted(rows, key=lambda x: x[2] if x[2] else 1e18)]
        print(f"{s}: measured ranking {' < '.join(by_m)}; simulated {' < '.join(by_s)}"
              f"{'' if by_m == by_s else '  (differs)'}")


if __name__ == "__main__":
    main()
