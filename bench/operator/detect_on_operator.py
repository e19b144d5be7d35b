#!/usr/bin/env python3
"""Straggler detection latency on the operator path, measured end to end.

No Kubernetes cluster can run here, so this is the closest faithful substitute:
  * the API emulator (star-test-apiserver) stands in for the API server;
  * the real star-operator reconciles the TrainingJob (examples/fmnist-job.yaml, the
    demo's job: 4 workers, 400m CPU each) and serves the report endpoint;
  * the bench plays kubelet: it marks the operator's pods Running and starts each pod's
    container, the real star-fmnist with the pod's own environment (the job token from
    its Secret), as a process in a cgroup with the pod's CPU limit. What a pod network
    would give is replaced by loopback: STAR_LISTEN_HOST and the store host are 127.0.0.1
    and the workers' metrics endpoints are off (they would share one port);
  * a co-located neighbor (`star busy`, N threads, weight 100 per thread as in
    `star local --inject worker=W,neighbor=N`) starts beside one worker, inside that
    worker's CPU limit, a few seconds after every worker has finished its first iteration.

It records when the straggler shows, polled every 100 ms from the emulator: the operator's
StragglerDetected Event and the TrainingJob's status.stragglers[] (written once per
--status-interval, 2 s by default as in the chart, or sooner after a straggler). A clean run starts no neighbor and
counts every worker flagged. There is no node agent, so no CPU is given back: the run ends
once the straggler shows (or at --watch seconds).

  python3 bench/operator/detect_on_operator.py [--build build] [--runs 3] [--clean-runs 1]
      [--worker 2] [--threads 3] [--onset 3] [--watch 30] [--out FILE.json] [--keep]
      [--log-reports] [--env NAME VALUE]...

Needs root (cgroups). Prints one line per run and a summary; --out writes every run.
"""
import argparse
import base64
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB, NS = "fmnist", "default"
CFS_PERIOD_US = 100000


def fail(message):
    sys.exit("detect_on_operator: " + message)


class Api:
    """Plain HTTP calls to the emulator (no authentication), JSON in and out."""

    def __init__(self, base):
        self.base = base

    def call(self, method, path, body=None, content_type="application/json"):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def get(self, path):
        return self.call("GET", path)

    def merge_patch(self, path, body):
        return self.call("PATCH", path, body, "application/merge-patch+json")


def wait_for(what, check, timeout, interval=0.1):
    """Polls check() until it returns something truthy, bounded by timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    fail(f"timed out after {timeout:.0f} s waiting for {what}")


def wait_line(proc, pattern, timeout):
    """The first stdout line of proc matching pattern (a regex with one group)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(pattern, line)
        if m:
            return m.group(1)
    fail(f"{proc.args[0]} did not print /{pattern}/ within {timeout:.0f} s")


class Cgroups:
    """slot<i>/{main,neighbor} under one parent in the cpu (v1) or unified (v2) hierarchy."""

    def __init__(self, name):
        v1 = "/sys/fs/cgroup/cpu"
        self.v2 = not os.path.isdir(v1)
        self.root = os.path.join("/sys/fs/cgroup" if self.v2 else v1, name)
        os.makedirs(self.root)
        if self.v2:
            self._write(self.root, "cgroup.subtree_control", "+cpu")

    @staticmethod
    def _write(d, f, value):
        with open(os.path.join(d, f), "w") as out:
            out.write(str(value))

    def slot(self, i, millicores):
        d = os.path.join(self.root, f"slot{i}")
        os.makedirs(d)
        quota = millicores * CFS_PERIOD_US // 1000
        if self.v2:
            self._write(d, "cpu.max", f"{quota} {CFS_PERIOD_US}")
            self._write(d, "cgroup.subtree_control", "+cpu")
        else:
            self._write(d, "cpu.cfs_period_us", CFS_PERIOD_US)
            self._write(d, "cpu.cfs_quota_us", quota)
        for sub in ("main", "neighbor"):
            os.makedirs(os.path.join(d, sub))
        return d

    def set_weight(self, d, weight):
        if self.v2:
            self._write(d, "cpu.weight", weight)
        else:
            self._write(d, "cpu.shares", max(2, weight * 1024 // 100))

    def procs_file(self, d):
        return os.path.join(d, "cgroup.procs")

    def remove(self):
        for d, subdirs, _ in sorted(os.walk(self.root), key=lambda w: -w[0].count("/")):
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.05)


class ReportLog:
    """A proxy in front of the report endpoint that logs every report and its answer
    (JSON lines: monotonic time, request, response) for --log-reports."""

    def __init__(self, upstream, path):
        out, lock = open(path, "w"), threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                t = time.monotonic()
                req = urllib.request.Request(upstream + self.path, data=body, method="POST")
                for k in ("Authorization", "Content-Type"):
                    if self.headers.get(k):
                        req.add_header(k, self.headers[k])
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        code, answer = r.status, r.read()
                except urllib.error.HTTPError as e:
                    code, answer = e.code, e.read()
                with lock:
                    out.write(json.dumps({"t": t, "report": json.loads(body),
                                          "answer": json.loads(answer or b"null")}) + "\n")
                    out.flush()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def spawn_in(cgroup_procs, argv, env, log):
    """Starts argv with env, stdout and stderr to log, inside the cgroup before exec."""
    def enter():
        with open(cgroup_procs, "w") as f:
            f.write(str(os.getpid()))
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=enter,
                            start_new_session=True)


class Run:
    """One job: emulator, operator, 4 workers in cgroups, and (unless clean) a neighbor."""

    def __init__(self, args, index, clean):
        self.args, self.index, self.clean = args, index, clean
        self.dir = tempfile.mkdtemp(prefix="star-opdetect-")
        self.procs, self.cgroups, self.report_log = [], None, None
        self.build = os.path.abspath(args.build)

    def start(self, argv, **kw):
        p = subprocess.Popen(argv, text=True, stdout=subprocess.PIPE,
                             stderr=open(os.path.join(self.dir, os.path.basename(argv[0]) + ".log"), "w"),
                             start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def control_plane(self):
        kc = os.path.join(self.dir, "kubeconfig")
        api = self.start([os.path.join(self.build, "tests/apiserver/star-test-apiserver"), "--listen",
                          "127.0.0.1:0", "--crds", os.path.join(ROOT, "crds"), "--kubeconfig-out", kc])
        self.api = Api(wait_line(api, r"listening on (http://\S+)", 30))
        op = self.start([os.path.join(self.build, "operator/star-operator"), "--kubeconfig", kc,
                         "--namespace", NS, "--report-listen", "127.0.0.1:0", "--metrics-listen", "",
                         "--status-interval", self.args.status_interval])
        self.report_url = wait_line(op, r"report-url (\S+)", 60)
        if self.args.log_reports:
            self.report_log = ReportLog(self.report_url, os.path.join(self.dir, "reports.jsonl"))
        subprocess.run(["kubectl", "--kubeconfig", kc, "--cache-dir", os.path.join(self.dir, "cache"),
                        "apply", "-f", os.path.join(ROOT, "examples/fmnist-job.yaml")],
                       check=True, capture_output=True, text=True)

    def pods(self):
        got = self.api.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=" +
                           urllib.parse.quote(f"star.dev/job={JOB}"))
        items = (got or {}).get("items", [])
        return sorted(items, key=lambda p: p["metadata"]["name"]) if len(items) == 4 else None

    def token(self):
        s = self.api.get(f"/api/v1/namespaces/{NS}/secrets/{JOB}-token")
        return base64.b64decode(s["data"]["token"]).decode() if s else None

    def pod_env(self, pod, token):
        """The container's environment as kubelet would resolve it, on loopback."""
        env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
        for e in pod["spec"]["containers"][0].get("env", []):
            if "value" in e:
                env[e["name"]] = e["value"]
            elif "secretKeyRef" in e.get("valueFrom", {}):
                env[e["name"]] = token
        env["STAR_LISTEN_HOST"] = "127.0.0.1"
        port = urllib.parse.urlparse(env["STAR_STORE_URL"]).port
        env["STAR_STORE_URL"] = f"http://127.0.0.1:{port}"
        env["STAR_METRICS_ADDRESS"] = ""
        if self.report_log:
            env["STAR_CONTROLLER_URL"] = self.report_log.url
        for k, v in self.args.env:
            env[k] = v
        return env

    def workers(self):
        pods = wait_for("the operator's 4 pods", self.pods, 60)
        token = wait_for("the job's token Secret", self.token, 30)
        self.cgroups = Cgroups(f"star-opdetect-{os.getpid()}-{self.index}")
        self.slots, self.logs = [], []
        for i, pod in enumerate(pods):
            name = pod["metadata"]["name"]
            self.api.merge_patch(f"/api/v1/namespaces/{NS}/pods/{name}",
                                 {"spec": {"nodeName": f"node-{i}"}})
            self.api.merge_patch(f"/api/v1/namespaces/{NS}/pods/{name}/status",
                                 {"status": {"phase": "Running", "podIP": "127.0.0.1"}})
            mc = int(re.sub(r"m$", "", pod["spec"]["containers"][0]["resources"]["limits"]["cpu"]))
            slot = self.cgroups.slot(i, mc)
            self.slots.append(slot)
            log = os.path.join(self.dir, f"worker-{i}.log")
            self.logs.append(log)
            argv = [os.path.join(self.build, "training-shim/examples/fmnist/star-fmnist")]
            self.procs.append(spawn_in(self.cgroups.procs_file(os.path.join(slot, "main")), argv,
                                       self.pod_env(pod, token), open(log, "w")))
        return time.monotonic()

    def trained(self):
        """Whether every worker has printed its startup line (after its first iteration)."""
        for log in self.logs:
            with open(log) as f:
                if "startup (job clock)" not in f.read():
                    return False
        return True

    def neighbor(self):
        w = self.args.worker
        d = os.path.join(self.slots[w], "neighbor")
        self.cgroups.set_weight(d, 100 * self.args.threads)
        argv = [os.path.join(self.build, "cli/star"), "busy", "--threads", str(self.args.threads),
                "--seconds", str(self.args.watch + 30)]
        self.procs.append(spawn_in(self.cgroups.procs_file(d), argv, {"PATH": os.environ["PATH"]},
                                   open(os.path.join(self.dir, "neighbor.log"), "w")))
        return time.monotonic()

    def flagged(self):
        """Workers in StragglerDetected Events and in status.stragglers[]."""
        events = self.api.get(f"/api/v1/namespaces/{NS}/events") or {}
        by_event = set()
        for e in events.get("items", []):
            if e.get("reason") == "StragglerDetected":
                m = re.match(r"worker (\d+)", e.get("message", ""))
                by_event.add(int(m.group(1)) if m else -1)
        tj = self.api.get(f"/apis/star.dev/v1alpha1/namespaces/{NS}/trainingjobs/{JOB}") or {}
        by_status = {s.get("worker") for s in tj.get("status", {}).get("stragglers", [])}
        return by_event, by_status

    def watch(self, onset):
        """Seconds from onset to the first Event and to status for each flagged worker."""
        seen = {"event": {}, "status": {}}
        deadline = time.monotonic() + self.args.watch
        while time.monotonic() < deadline:
            by_event, by_status = self.flagged()
            now = time.monotonic() - onset
            for w in by_event:
                seen["event"].setdefault(w, round(now, 2))
            for w in by_status:
                seen["status"].setdefault(w, round(now, 2))
            w = self.args.worker
            if not self.clean and w in seen["event"] and w in seen["status"]:
                break
            time.sleep(0.1)
        return seen

    def measure(self):
        self.control_plane()
        t0 = self.workers()
        wait_for("every worker's first iteration", self.trained, 120, 0.2)
        trained = time.monotonic() - t0
        time.sleep(self.args.onset)  # the neighbor arrives this long after training started
        onset = time.monotonic() if self.clean else self.neighbor()
        with open(os.path.join(self.dir, "onset"), "w") as f:
            f.write(f"{onset}\n")  # time.monotonic(), as reports.jsonl's t
        seen = self.watch(onset)
        return {"run": self.index, "clean": self.clean, "first_iteration_s": round(trained, 2),
                "event_s": seen["event"], "status_s": seen["status"]}

    def close(self):
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        if self.cgroups:
            self.cgroups.remove()
        if self.report_log:
            self.report_log.close()
        if self.args.keep:
            print(f"run {self.index}: logs kept in {self.dir}", flush=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def spread(values):
    if not values:
        return "none"
    return f"{statistics.median(values):.2f} s median ({min(values):.2f}-{max(values):.2f} s, n={len(values)})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="CMake build directory")
    ap.add_argument("--runs", type=int, default=3, help="runs with a neighbor")
    ap.add_argument("--clean-runs", type=int, default=1, help="runs without one (false alarms)")
    ap.add_argument("--worker", type=int, default=2, choices=range(4), help="the neighbor's worker")
    ap.add_argument("--threads", type=int, default=3, help="the neighbor's busy threads")
    ap.add_argument("--onset", type=float, default=3, help="seconds after every first iteration")
    ap.add_argument("--watch", type=float, default=30, help="seconds to watch after the onset")
    ap.add_argument("--status-interval", default="2s", help="star-operator --status-interval")
    ap.add_argument("--out", help="write every run here (JSON)")
    ap.add_argument("--env", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="set this in every worker's environment, over the pod's (an experiment)")
    ap.add_argument("--log-reports", action="store_true",
                    help="log every report and its answer through a proxy (reports.jsonl; use with --keep)")
    ap.add_argument("--keep", action="store_true", help="keep each run's logs (the path is printed)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        fail("needs root (cgroups)")
    if shutil.which("kubectl") is None:
        fail("kubectl is not on PATH")
    results = []
    for i in range(args.runs + args.clean_runs):
        run = Run(args, i, clean=i >= args.runs)
        try:
            results.append(run.measure())
        finally:
            run.close()
        r = results[-1]
        print(f"run {i} ({'clean' if r['clean'] else 'neighbor on worker %d' % args.worker}): first iteration "
              f"{r['first_iteration_s']} s after the workers started; flagged after the onset: "
              f"Event {r['event_s']}, status {r['status_s']}", flush=True)
    hit = [r for r in results if not r["clean"]]
    ev = [r["event_s"][args.worker] for r in hit if args.worker in r["event_s"]]
    st = [r["status_s"][args.worker] for r in hit if args.worker in r["status_s"]]
    false_alarms = sum(len([w for w in r["event_s"] if r["clean"] or w != args.worker]) for r in results)
    print(f"straggler Event: {spread(ev)}; in status: {spread(st)}; missed {len(hit) - len(ev)} of "
          f"{len(hit)}; other workers flagged: {false_alarms}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "runs": results}, f, indent=1)


if __name__ == "__main__":
    main()
