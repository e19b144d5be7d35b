#!/usr/bin/env bash
# Runs `star sim --policy all` over the cluster-scale scenarios (bench/sim/scale/*.json,
# 64 / 256 / 1024 workers, AllReduce and ParameterServer, CPU or bandwidth stragglers)
# and prints a markdown table: TTA of policy auto against SSGD and ASGD, auto's
# reduction against each, the best policy, and the wall time of each file's runs.
#
#   bench/sim/scale.sh [STAR] [SCENARIO.json ...]      (or STAR=path/to/star)
#
# Deterministic: each scenario's "seed" (1) drives its jitter; --seed is not passed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
star="${1:-${STAR:-star}}"
shift || true
if [ "$#" -eq 0 ]; then set -- "$here"/scale/*.json; fi
command -v "$star" >/dev/null || { echo "scale.sh: no star binary: $star" >&2; exit 1; }

rows="$(mktemp)"
trap 'rm -f "$rows"' EXIT
for f in "$@"; do
  start=$(date +%s.%N)
  out="$("$star" sim "$f" --policy all)"
  end=$(date +%s.%N)
  printf '%s\t%s\t%s\n' "$f" "$(python3 -c "print(round($end - $start, 1))")" "$out" >>"$rows"
done

python3 - "$rows" <<'PY'
import json, os, sys

def fmt(t):
    return "miss" if t is None else f"{t:.0f}"

def gain(a, b):  # auto's reduction against b, in %
    if a is None or b is None:
        return "n/a"
    return f"{100 * (b - a) / b:+.0f}%".replace("+", "")

print("| scenario | arch | workers | stragglers | auto TTA (s) | SSGD TTA (s) | ASGD TTA (s) "
      "| auto vs SSGD | auto vs ASGD | best policy (TTA s) | wall (s) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
total = 0.0
runs = []
for line in open(sys.argv[1]):
    path, wall, out = line.rstrip("\n").split("\t", 2)
    total += float(wall)
    s = json.load(open(path))
    runs.append((s.get("architecture", "AllReduce"), s["workers"], path, wall, out, s))
for _, _, path, wall, out, s in sorted(runs):
    r = {x["policy"]: x["tta_seconds"] for x in json.loads(out)["results"]}
    eps = s.get("episodes", [])
    cpu = [e for e in eps if "cpu" in e]
    bw = [e for e in eps if "bandwidth" in e]
    parts = []
    if cpu:
        transient = sum(1 for e in cpu if "end" in e)
        parts.append(f"{len(cpu)} cpu {min(e['cpu'] for e in cpu)}-{max(e['cpu'] for e in cpu)}"
                     + (f" ({transient} transient)" if transient else ""))
    if bw:
        parts.append(f"{len(bw)} bw {min(e['bandwidth'] for e in bw)}-{max(e['bandwidth'] for e in bw)}")
    reached = {p: t for p, t in r.items() if t is not None}
    best = min(reached, key=reached.get) if reached else None
    arch = "PS" if s.get("architecture") == "ParameterServer" else "AR"
    print(f"| {os.path.basename(path)} | {arch} | {s['workers']} | {', '.join(parts)} "
          f"| {fmt(r['auto'])} | {fmt(r['ssgd'])} | {fmt(r['asgd'])} "
          f"| {gain(r['auto'], r['ssgd'])} | {gain(r['auto'], r['asgd'])} "
          f"| {best} ({fmt(reached.get(best))}) | {wall} |")
print(f"\nwall time of all runs (`--policy all`, 7 policies each): {total:.0f} s")
PY
