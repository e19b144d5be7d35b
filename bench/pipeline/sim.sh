#!/usr/bin/env bash
# `star sim` against the testbed: builds a pipeline scenario from adapt.sh's clean
# `ssgd` runs (each stage's forward and backward per micro-batch, each link's time per
# message, and the work outside the schedule: the measured iteration beyond the model's
# time for static 1F1B), simulates the same job with the same slow link under ssgd and
# auto, and prints the simulated iterations beside the measured ones.
#   bash bench/pipeline/sim.sh [SLOW]   (default delay=40ms, as adapt.sh; run adapt.sh first)
. "$(dirname "$0")/../lib.sh"
build star
OUT=bench/pipeline/out/adapt
slow=${1:-delay=40ms}
label=${slow#*=}
[ -f "$OUT/summary.txt" ] || { echo "bench/pipeline/sim.sh: no $OUT/summary.txt; run bench/pipeline/adapt.sh first" >&2; exit 1; }
/usr/bin/python3 - "$BUILD/cli/star" "$OUT" "$slow" "$label" <<'PY'
import glob, json, statistics, subprocess, sys, tempfile
star, out, slow, label = sys.argv[1:]
kind, value = slow.split("=")

def ends(run):
    return [json.loads(open(f).read().strip().splitlines()[-1]) for f in sorted(glob.glob(f"{out}/{run}/worker-*.log"))]

def slowest(run, key):
    v = [e[key] for e in ends(run) if e.get(key) is not None]
    return max(v) / 1e3 if v else None

def runs(name):
    return sorted(d for d in glob.glob(f"{out}/{name}-[0-9]") if glob.glob(d + "/worker-*.log"))

clean = [d.rsplit("/", 1)[1] for d in runs("clean-ssgd")]
if not clean:
    sys.exit("bench/pipeline/sim.sh: no clean-ssgd runs in " + out)
stages = [ends(r) for r in clean]
S = len(stages[0])
med = statistics.median
fwd = [med(run[i]["forward_ms"] for run in stages) / 1e3 for i in range(S)]
bwd = [med(run[i]["backward_ms"] for run in stages) / 1e3 for i in range(S)]
def per_message(direction):  # +1: activations (to the next stage), -1: gradients
    v = [l["send_ms"] / l["messages"] for run in stages for i, e in enumerate(run) for l in e["links"]
         if l["peer"] == i + direction and l["messages"] > 0]
    return med(v) / 1e3
measured_clean = med(slowest(r, "median_iteration_ms") for r in clean)
scenario = {"workers": S, "batch_per_worker": 256, "noise_scale": 0, "min_updates": 120,
            "communication_seconds": 0, "detection_window": 10, "jitter": 0,
            "pipeline": {"stages": S, "micro_batches": stages[0][0]["micro_batches"],
                         "forward_seconds": fwd, "backward_seconds": bwd,
                         "activation_seconds": per_message(1), "gradient_seconds": per_message(-1)}}

def sim(sc, policy):
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(sc, f); f.flush()
        r = subprocess.run([star, "sim", f.name, "--policy", policy], check=True, capture_output=True, text=True)
    return json.loads(r.stdout)["results"][0]

# The work outside the schedule: the clean measured iteration beyond the model's 1F1B.
model_clean = sim(scenario, "ssgd")["static_iteration_seconds"]
scenario["pipeline"]["outside_seconds"] = max(0.0, measured_clean - model_clean)
if kind == "delay":
    seconds = float(value.rstrip("ms")) / (1e3 if value.endswith("ms") else 1)
    scenario["episodes"] = [{"worker": 1, "peer": 2, "delay": seconds}]
else:
    sys.exit("bench/pipeline/sim.sh: only delay=D is modelled here, got " + slow)
print("scenario:", json.dumps(scenario))
print("%-22s %10s %10s %7s" % ("cell", "measured", "star sim", "error"))
def row(name, measured, simulated):
    print("%-22s %8.0f ms %8.0f ms %+6.1f%%" % (name, 1e3 * measured, 1e3 * simulated, 100 * (simulated / measured - 1)))
row("clean ssgd (fitted)", measured_clean, sim(scenario | {"episodes": []}, "ssgd")["static_iteration_seconds"])
static = sim(scenario, "ssgd")["static_iteration_seconds"]
adapted = sim(scenario, "auto")["adapted_iteration_seconds"]
m_static = med(slowest(r.rsplit("/", 1)[1], "median_iteration_ms") for r in runs(f"{label}-ssgd"))
m_adapted = med(slowest(r.rsplit("/", 1)[1], "adapted_median_iteration_ms") for r in runs(f"{label}-auto"))
row(f"{label} ssgd (static)", m_static, static)
row(f"{label} auto (adapted)", m_adapted, adapted)
PY
