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
    a stretch with fewer than 2 of the worker's samples (no period to read) gets no
    episode, so the worker runs it at full speed;
  - the testbed's job and trainer, as the simulator's optional fields: the detector's
    window (--detection-window, bench/tta/job.yaml's 10), SGD's momentum, which the shim
    restarts at every switch (--momentum, star-fmnist's 0.9), one model copy per group in
    mode groups, judged on rank 0's copy (the testbed evaluates worker 0's snapshots), and
    whether AMP was available (some sample of the runs has AMP on; --amp overrides);
  - the progress target: the clean SSGD runs' median iterations to the target I, as
    min_updates = (I - m (1 - m^I) / (1 - m)) / (1 + noise_scale / 256) (what I updates at
    the global batch are worth, momentum m restarting at the start), with noise_scale and
    staleness_penalty chosen on the --fit scenarios (a grid, least squares of
    log(simulated / measured TTA)).
The simulation starts at the run's first iteration; its TTA is compared with the run's
TTA less that start. Prints the fitted parameters, one row per run and the per-cell
medians with the policy ranking per scenario (markdown), and writes the scenarios and a
manifest (runs.json: the clean fit and, per scenario file, the run's measured TTA and
start) to --out.

--replay DIR re-runs a calibration from DIR's scenarios and manifest instead of the
reports (the progress parameters are fitted again; the rest of each scenario is kept,
with the testbed options above set from the flags).

--noise-scale and --staleness-penalty take those values instead of fitting them (to test
a calibration on runs it was not fitted on).

Two other readings of the speeds, kept to test them (git history of bench/README.md has what they gave):
  --base run: each run's workers get the clean compute per sample scaled by the median
    compute per sample of the run's uninjected workers over the clean runs' (on the shared
    testbed host the others speed up or slow down with the injected worker); reports only.
  --match-clean-period: the clean runs' period holds each iteration's wait for the ring's
    slowest member, which the simulator's jitter adds again (a clean SSGD run simulates
    about 12% slower than it ran); this scales compute per sample, and the injected
    workers' cpu (read against the same period where the period gave the slower reading,
    and scaled alike where the compute did), by the factor that makes the simulated clean
    period the measured one.

Usage:
  bench/calibration/calibrate.py --star build/cli/star --clean DIR... --runs DIR... \\
                         [--fit neighbor] [--noise-scale X --staleness-penalty Y] [--out DIR]
  bench/calibration/calibrate.py --star build/cli/star --replay bench/calibration/data \\
                         [--fit neighbor] [--out DIR]
where each DIR of --clean and --runs is a tta_bench --out directory (its runs/*.json are
read), and --fit is a comma-separated list of scenarios or "all".
"""
import argparse
import glob
import itertools
import json
import math
import os
import re
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

GLOBAL_BATCH = 256
PHI_GRID = [0, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 65536]
PENALTY_GRID = [0, 0.1, 0.3, 1.0, 3.0, 10.0]
# Fields of a fitted scenario that the fit of the progress model sets.
PROGRESS_FIELDS = ("noise_scale", "min_updates", "staleness_penalty")


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
        # A co-located sender (bwneighbor) slows the worker's link, as a shaped one does.
        "kind": "bandwidth" if "bandwidth" in fields or "bwneighbor" in fields else "cpu",
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
            if len(mine) < 2:
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


def run_base(r, clean):
    """The clean fit with its compute scaled to this run's uninjected workers: their median
    compute per sample over the clean runs' (on a shared host they speed up when an injected
    worker uses less of it)."""
    injected = {parse_injection(spec)["worker"] for spec in r.get("injections", [])}
    mine = [s["compute_seconds"] / s["batch"] for s in r["samples"] if s["worker"] not in injected]
    if not mine:
        return clean
    f = statistics.median(mine) / clean["raw_compute_per_sample"]
    return dict(clean, compute_seconds_per_sample=clean["compute_seconds_per_sample"] * f,
                raw_compute_per_sample=clean["raw_compute_per_sample"] * f)


def runs_from_reports(a):
    """The clean fit and one entry per run: its fitted scenario, measured TTA and start."""
    clean_runs = reports(a.clean, "clean")
    if not clean_runs:
        sys.exit("calibrate.py: --clean: no clean run with a TTA in " + " ".join(a.clean))
    clean = fit_clean(clean_runs)
    amp = any(s.get("amp") for r in reports(a.runs) for s in r["samples"])
    entries = []
    for r in reports(a.runs):
        if r["_scenario"] == "clean":
            continue
        # <tta_bench out dir>-<scenario>-<policy>.json
        name = os.path.basename(os.path.dirname(os.path.dirname(r["_file"]))) + "-" + os.path.basename(r["_file"])
        base = run_base(r, clean) if a.base == "run" else clean
        entries.append({
            "file": name, "scenario": r["_scenario"], "policy": r["_policy"],
            "measured_tta": r["tta_seconds"], "start": start_time(r), "report": r["_file"],
            "fitted": {
                "architecture": "AllReduce", "workers": 4, "batch_per_worker": GLOBAL_BATCH // 4,
                "compute_seconds_per_sample": base["compute_seconds_per_sample"],
                "communication_seconds": clean["communication_seconds"], "jitter": clean["jitter"],
                "episodes": episodes(r, base), "amp_available": amp, "seed": 1,
            },
        })
    return f"{len(clean_runs)} runs", clean, entries


def runs_from_replay(a):
    """The same from a directory this script wrote (its runs.json and scenarios)."""
    path = os.path.join(a.replay, "runs.json")
    try:
        with open(path) as fh:
            manifest = json.load(fh)
    except (OSError, ValueError) as e:
        sys.exit(f"calibrate.py: --replay: cannot read {path}: {e}")
    entries = []
    for e in manifest["runs"]:
        with open(os.path.join(a.replay, e["file"])) as fh:
            fitted = json.load(fh)
        for k in PROGRESS_FIELDS + ("momentum", "group_replicas", "detection_window"):
            fitted.pop(k, None)
        fitted.setdefault("amp_available", manifest["amp_available"])
        entries.append(dict(e, fitted=fitted))
    return f"replayed from {path}", manifest["clean"], entries


def clean_period(star, e, cps):
    """Seconds per iteration of e's scenario without episodes, in SSGD, at cps per sample."""
    s = dict(e["fitted"], episodes=[], compute_seconds_per_sample=cps, noise_scale=0, min_updates=300)
    r = run_sim(star, s, "ssgd")
    return r["tta_seconds"] / r["iterations"]


def period_factor(star, e, clean):
    """The factor on compute per sample that makes the simulated clean SSGD run iterate at the
    clean runs' measured period. That period already holds each iteration's wait for the
    ring's slowest member, which the simulator's jitter adds again; the simulated period is
    linear in compute per sample, so two simulations give the factor."""
    target = clean["compute_seconds_per_sample"] * GLOBAL_BATCH / 4 + clean["communication_seconds"]
    c0 = clean["compute_seconds_per_sample"]
    p1, p2 = clean_period(star, e, c0), clean_period(star, e, c0 / 2)
    return 1 - (p1 - target) / ((p1 - p2) * 2)


def scenario(e, clean, a, phi, penalty):
    m, iters = a.momentum, clean["iterations"]
    worth = iters - (m * (1 - m ** iters) / (1 - m) if m > 0 else 0)
    s = dict(e["fitted"])
    if a.period_factor is not None:  # the injected workers' speeds were read against that period too
        s["compute_seconds_per_sample"] *= a.period_factor
        s["episodes"] = [dict(ep, cpu=round(min(1.0, ep["cpu"] * a.period_factor), 4)) if "cpu" in ep else ep
                         for ep in s["episodes"]]
    s.update({
        "noise_scale": phi, "min_updates": worth / (1 + phi / GLOBAL_BATCH),
        "staleness_penalty": penalty, "momentum": m, "group_replicas": True,
        "detection_window": a.detection_window,
    })
    if a.amp != "auto":
        s["amp_available"] = a.amp == "on"
    return s


def run_sim(star, scen, policy):
    """`star sim` of one scenario under one policy: its result object."""
    out = subprocess.run([star, "sim", "-", "--policy", policy], input=json.dumps(scen),
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"calibrate.py: star sim failed: {out.stderr.strip()}")
    return json.loads(out.stdout)["results"][0]


def simulate(star, scen, policy, cache={}):
    key = (json.dumps(scen, sort_keys=True), policy)
    if key not in cache:
        cache[key] = run_sim(star, scen, policy)["tta_seconds"]
    return cache[key]


def simulate_all(star, jobs):
    """[(scenario, policy)] -> simulated TTAs, two at a time."""
    with ThreadPoolExecutor(2) as ex:
        return list(ex.map(lambda j: simulate(star, *j), jobs))


def fit_progress(a, entries, clean):
    best = None
    for phi in [a.noise_scale] if a.noise_scale is not None else PHI_GRID:
        for penalty in [a.staleness_penalty] if a.staleness_penalty is not None else PENALTY_GRID:
            sims = simulate_all(a.star, [(scenario(e, clean, a, phi, penalty), e["policy"]) for e in entries])
            err = sum(math.log((s if s else 1e9) / (e["measured_tta"] - e["start"])) ** 2
                      for s, e in zip(sims, entries))
            if best is None or err < best[0]:
                best = (err, phi, penalty)
    return best[1], best[2]


def print_cells(cells, fit):
    print("\n| scenario | policy | runs | measured median (s) | simulated median (s) | difference |")
    print("|---|---|---|---|---|---|")
    ranking, within = {}, 0
    for (s, p), v in sorted(cells.items()):
        m = statistics.median(x for x, _ in v)
        sims = [y for _, y in v if y is not None]
        sm = statistics.median(sims) if sims else None
        within += sm is not None and abs(sm / m - 1) <= 0.15
        ranking.setdefault(s, []).append((p, m, sm, [x for x, _ in v]))
        diff = f"{(sm / m - 1) * 100:+.0f}%" if sm else "-"
        print(f"| {s}{' (fit)' if s in fit else ''} | {p} | {len(v)} | {m:.1f} | "
              f"{'-' if sm is None else round(sm, 1)} | {diff} |")
    print(f"\n{within} of {len(cells)} cells within 15% of the measured TTA.")
    print_ranking(ranking)


def print_ranking(ranking):
    """The policy order per scenario by median, and the order of every pair of policies
    that the runs separate (one's slowest run faster than the other's fastest)."""
    same, kept, separated = 0, 0, 0
    for s, rows in ranking.items():
        by_m = [r[0] for r in sorted(rows, key=lambda r: r[1])]
        by_s = [r[0] for r in sorted(rows, key=lambda r: r[2] if r[2] else 1e18)]
        same += by_m == by_s
        flipped = []
        for a, b in itertools.permutations(rows, 2):
            if max(a[3]) < min(b[3]):
                separated += 1
                if a[2] is not None and (b[2] is None or a[2] < b[2]):
                    kept += 1
                else:
                    flipped.append(f"{a[0]} < {b[0]}")
        print(f"{s}: measured ranking {' < '.join(by_m)}; simulated {' < '.join(by_s)}"
              f"{'' if by_m == by_s else '  (differs)'}"
              f"{'; separated pairs simulated the other way: ' + ', '.join(flipped) if flipped else ''}")
    print(f"Ranking kept in {same} of {len(ranking)} scenarios; the order of {kept} of {separated} "
          f"policy pairs whose runs do not overlap.")


def write_out(out, clean, entries, scens):
    os.makedirs(out, exist_ok=True)
    for e, scen in zip(entries, scens):
        with open(os.path.join(out, e["file"]), "w") as fh:
            json.dump(scen, fh, indent=1)
    manifest = {"clean": clean, "amp_available": all(s.get("amp_available", True) for s in scens),
                "runs": [{k: v for k, v in e.items() if k != "fitted"} for e in entries]}
    with open(os.path.join(out, "runs.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--star", required=True)
    ap.add_argument("--clean", nargs="+")
    ap.add_argument("--runs", nargs="+")
    ap.add_argument("--replay", help="a directory this script wrote with --out")
    ap.add_argument("--fit", default="neighbor", help='scenario(s) the progress parameters are chosen on, or "all"')
    ap.add_argument("--noise-scale", type=float, help="take this noise scale instead of fitting one")
    ap.add_argument("--staleness-penalty", type=float, help="take this penalty instead of fitting one")
    ap.add_argument("--momentum", type=float, default=0.9, help="the trainer's SGD momentum")
    ap.add_argument("--detection-window", type=int, default=10, help="the testbed job's detection window")
    ap.add_argument("--amp", choices=["auto", "on", "off"], default="auto",
                    help="AMP available to the runs (auto: some sample had it on)")
    ap.add_argument("--base", choices=["clean", "run"], default="clean",
                    help="the workers' speed: the clean runs' (clean) or each run's uninjected workers' (run)")
    ap.add_argument("--match-clean-period", action="store_true",
                    help="scale compute per sample so that the simulated clean run iterates at the measured period")
    ap.add_argument("--out")
    a = ap.parse_args()
    if not 0 <= a.momentum < 1:
        ap.error("--momentum: must be in [0, 1)")
    if a.noise_scale is not None and a.noise_scale < 0:
        ap.error("--noise-scale: must be >= 0")
    if a.staleness_penalty is not None and a.staleness_penalty < 0:
        ap.error("--staleness-penalty: must be >= 0")
    if a.replay and a.base == "run":
        ap.error("--base run: needs the runs' reports (--clean and --runs), not --replay")
    if a.replay:
        source, clean, entries = runs_from_replay(a)
    elif a.clean and a.runs:
        source, clean, entries = runs_from_reports(a)
    else:
        ap.error("give --clean and --runs, or --replay")
    a.period_factor = period_factor(a.star, entries[0], clean) if a.match_clean_period else None
    fit = sorted({e["scenario"] for e in entries}) if a.fit == "all" else a.fit.split(",")
    fit_on = [e for e in entries if e["scenario"] in fit]
    if not fit_on:
        ap.error(f"--fit: no run of scenario(s) {a.fit}")
    phi, penalty = fit_progress(a, fit_on, clean)
    print(f"clean fit ({source}): " + ", ".join(f"{k} {v:.5g}" for k, v in clean.items()))
    if a.period_factor is not None:
        print(f"compute per sample and the injected workers' cpu x {a.period_factor:.4f} "
              f"(the simulated clean period matches the measured one)")
    given = a.noise_scale is not None and a.staleness_penalty is not None
    how = "given" if given else f"fit on {','.join(fit)}"
    print(f"progress {how} ({len(fit_on)} runs): noise_scale {phi}, staleness_penalty {penalty}; "
          f"momentum {a.momentum}, detection window {a.detection_window}, group replicas\n")
    scens = [scenario(e, clean, a, phi, penalty) for e in entries]
    sims = simulate_all(a.star, [(s, e["policy"]) for s, e in zip(scens, entries)])
    cells = {}
    print("| run | measured TTA (s) | simulated (s) | sim / measured |\n|---|---|---|---|")
    for e, sim in zip(entries, sims):
        sim_tta = sim + e["start"] if sim is not None else None
        cells.setdefault((e["scenario"], e["policy"]), []).append((e["measured_tta"], sim_tta))
        ratio = f"{sim_tta / e['measured_tta']:.2f}" if sim_tta else "-"
        print(f"| {e['file']} | {e['measured_tta']:.1f} | "
              f"{sim_tta if sim_tta is None else round(sim_tta, 1)} | {ratio} |")
    print_cells(cells, [] if given else fit)  # "(fit)" marks the scenarios fitted on
    if a.out:
        write_out(a.out, clean, entries, scens)


if __name__ == "__main__":
    main()
