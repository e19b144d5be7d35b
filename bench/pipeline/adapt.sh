#!/usr/bin/env bash
# The control loop adapting a pipeline's schedule: bench/pipeline/job-adapt.yaml under
# `star local --policy ssgd` (static 1F1B) and `--policy auto` (the warm-up depths the
# pipeline model chooses from the stages' reports), on clean links and with the link
# between stages 1 and 2 slowed both ways for the whole run (--inject worker=1,SLOW,peer=2:
# SLOW bandwidth=RATE shapes it with HTB, delay=D makes the stages hold each message D).
# Per run: the slowest stage's median iteration under
# the static schedule and under the loop's depths (- when none), and the loop's schedule
# event (its time, depths and the model's predictions). As root.
#   bash bench/pipeline/adapt.sh [ROUNDS] [SLOW]   (default 3, delay=40ms; writes bench/pipeline/out/adapt/)
#   JOB=bench/pipeline/job-hybrid.yaml LINK=worker=0,peer=1 OUT=bench/pipeline/out/hybrid \
#     bash bench/pipeline/adapt.sh        another job, link and output directory
. "$(dirname "$0")/../lib.sh"
build star star-fmnist
JOB=${JOB:-bench/pipeline/job-adapt.yaml}
LINK=${LINK:-worker=1,peer=2}
OUT=${OUT:-bench/pipeline/out/adapt}
rm -rf "$OUT"; mkdir -p "$OUT"
slow=${2:-delay=40ms}
label=${slow#*=}
# One run in $OUT/$1 with --policy $2 (and --inject $3 if given).
run() {
  local dir=$OUT/$1
  "$BUILD/cli/star" local "$JOB" --policy "$2" --log-dir "$dir" --quiet \
      ${3:+--inject "$3"} > "$dir.report.json" 2> "$dir.err"
  /usr/bin/python3 - "$dir" "$1" <<'PY'
import glob, json, sys
d, name = sys.argv[1], sys.argv[2]
ends = [json.loads(open(f).read().strip().splitlines()[-1]) for f in sorted(glob.glob(d + "/worker-*.log"))]
def slowest(key):
    v = [e[key] for e in ends if e.get(key) is not None]
    return "%.0f" % max(v) if len(v) == len(ends) else "-"
ev = [e for e in json.load(open(d + ".report.json"))["timeline"] if e["event"] == "schedule"]
events = "; ".join("%.1fs %s" % (e["t"], e["detail"]) for e in ev) or "no schedule change"
print("%-16s static %5s  adapted %5s  %s" % (name, slowest("median_iteration_ms"), slowest("adapted_median_iteration_ms"), events))
PY
}
for n in $(seq 1 "${1:-3}"); do
  for p in ssgd auto; do
    run "clean-$p-$n" $p ""
    run "$label-$p-$n" $p "${LINK%%,*},$slow,${LINK#*,}"
  done
done | tee "$OUT/summary.txt"
