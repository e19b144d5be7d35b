#!/usr/bin/env python3
"""Straggler detection latency on the operator path, measured end to end.

On a real Kubernetes control plane (scripts/cluster.sh: etcd, kube-apiserver, controller
manager, scheduler and the test node star-node), started for the bench and removed after it
unless --cluster names one already up (with the CRDs applied):
  * the real star-operator, on this machine as the cluster admin, watches a namespace of
    each run's own, reconciles the TrainingJob (examples/fmnist-job.yaml, the demo's job:
    4 workers, 400m CPU each) and serves the report endpoint on the node's address;
  * the scheduler binds the pods to the test node, which runs each pod's container, the
    image ghcr.io/star-dev/fmnist:0.1 mapped to the built star-fmnist (STAR_NODE_IMAGES at
    `up`), with the pod's environment as the API server resolves it (the job token from its
    Secret), in its own network namespace (names resolve as cluster DNS gives them) and in
    a CPU cgroup with the pod's limit;
  * a co-located neighbor (`star busy`, N threads, weight 100 per thread as in
    `star local --inject worker=W,neighbor=N`) starts beside one worker, inside that
    worker's pod cgroup (the worker moved to a sibling child of default weight), a few
    seconds after every worker has finished its first iteration.

It records when the straggler shows, polled every 100 ms from the API server: the
operator's StragglerDetected Event and the TrainingJob's status.stragglers[] (written once
per --status-interval, 2 s by default as in the chart, or sooner after a straggler). A clean
run starts no neighbor and counts every worker flagged. There is no node agent, so no CPU is
given back: the run ends once the straggler shows (or at --watch seconds).

  python3 bench/operator-detect/detect_on_operator.py [--build build] [--cluster DIR] [--runs 3]
      [--clean-runs 1] [--worker 2] [--threads 3] [--onset 3] [--watch 30] [--out FILE.json]
      [--keep] [--log-reports] [--env NAME VALUE]...

Needs root (the cluster's test node, cgroups) and the cluster tools (scripts/k8s-tools.sh,
which `up` runs). Prints one line per run and a summary; --out writes every run.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB = "fmnist"
IMAGE = "ghcr.io/star-dev/fmnist:0.1"
CPU_HIERARCHY = "/sys/fs/cgroup/cpu"


def fail(message):
    sys.exit("detect_on_operator: " + message)


class Cluster:
    """The cluster of scripts/cluster.sh in `dir`: started (and removed by close()) unless
    it is already up."""

    def __init__(self, dir, build, own):
        self.dir, self.own = os.path.abspath(dir), own
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.kubectl_bin = os.path.join(self.dir, "bin", "kubectl")
        if not own and not os.path.exists(self.kubeconfig):
            fail(f"--cluster {self.dir}: no kubeconfig there (bash scripts/cluster.sh up {self.dir})")
        try:
            if own:
                self.up(build)
            with open(os.path.join(self.dir, "subnet")) as f:
                self.subnet = f.read().strip()
            self.api = Api(json.loads(self.kubectl("config", "view", "--raw", "-o", "json")))
            node = self.api.get("/api/v1/nodes?labelSelector=" + urllib.parse.quote("star.dev/test-node=true"))
            node = node["items"][0]
            self.node_ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
        except BaseException:
            self.close()
            raise

    def up(self, build):
        fmnist = os.path.join(build, "training-shim/examples/fmnist/star-fmnist")
        env = dict(os.environ, STAR_NODE_IMAGES=f"{IMAGE}={fmnist}")
        t = time.monotonic()
        up = subprocess.run(["bash", os.path.join(ROOT, "scripts/cluster.sh"), "up", self.dir],
                            env=env, capture_output=True, text=True)
        if up.returncode != 0:
            fail(f"scripts/cluster.sh up {self.dir} failed:\n{up.stderr[-3000:]}")
        self.kubectl("apply", "--server-side", "-f", os.path.join(ROOT, "crds"))
        self.kubectl("wait", "--for", "condition=established", "--timeout=60s",
                     "crd/trainingjobs.star.dev", "crd/nodeallocations.star.dev")
        print(f"cluster up in {time.monotonic() - t:.0f} s ({self.dir})", flush=True)

    def kubectl(self, *args, stdin=None, check=True):
        p = subprocess.run([self.kubectl_bin, "--kubeconfig", self.kubeconfig, *args], input=stdin,
                           capture_output=True, text=True, timeout=180)
        if check and p.returncode != 0:
            fail(f"kubectl {' '.join(args)}: {p.stderr.strip()}")
        return p.stdout

    def pod_cgroup(self, pod):
        qos = {"Guaranteed": "", "Burstable": "burstable", "BestEffort": "besteffort"}[pod["status"]["qosClass"]]
        return os.path.join(CPU_HIERARCHY, f"star-node-{self.subnet}", "kubepods", qos, "pod" + pod["metadata"]["uid"])

    def container_log(self, pod, container):
        m = pod["metadata"]
        return os.path.join(self.dir, "node", "pods", f"{m['namespace']}_{m['name']}_{m['uid']}", container + ".log")

    def close(self):
        if self.own:
            subprocess.run(["bash", os.path.join(ROOT, "scripts/cluster.sh"), "down", self.dir],
                           capture_output=True, text=True)


class Api:
    """HTTPS calls to the API server as the kubeconfig's user (client certificate files),
    JSON in and out."""

    def __init__(self, config):
        ctx = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == ctx["user"])
        self.base = cluster["server"]
        self.tls = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.tls.load_cert_chain(user["client-certificate"], user["client-key"])

    def call(self, method, path, body=None, content_type="application/json"):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.tls) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def get(self, path):
        return self.call("GET", path)


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


class Neighbor:
    """`star busy` beside a worker in its pod's cgroup (cgroup v1 cpu, as the test node makes
    it): the worker's processes move to the child main/ (default weight, 100), the neighbor
    runs in neighbor/ with weight 100 per thread, both under the pod's quota. close() kills
    it and moves the worker back, so that the test node can remove the pod's cgroup."""

    def __init__(self, pod_cgroup, argv, threads, log):
        self.pod = pod_cgroup
        self.main, self.side = os.path.join(pod_cgroup, "main"), os.path.join(pod_cgroup, "neighbor")
        for d in (self.main, self.side):
            os.makedirs(d, exist_ok=True)
        self._write(self.side, "cpu.shares", threads * 1024)
        for pid in self._procs(self.pod):
            self._move(pid, self.main)
        cgroup_procs = os.path.join(self.side, "cgroup.procs")

        def enter():
            with open(cgroup_procs, "w") as f:
                f.write(str(os.getpid()))
        self.proc = subprocess.Popen(argv, env={"PATH": os.environ["PATH"]}, stdout=log,
                                     stderr=subprocess.STDOUT, preexec_fn=enter, start_new_session=True)

    @staticmethod
    def _write(d, f, value):
        with open(os.path.join(d, f), "w") as out:
            out.write(str(value))

    @staticmethod
    def _procs(d):
        try:
            with open(os.path.join(d, "cgroup.procs")) as f:
                return f.read().split()
        except FileNotFoundError:
            return []

    def _move(self, pid, d):
        try:
            self._write(d, "cgroup.procs", pid)
        except (ProcessLookupError, OSError):
            pass  # it exited meanwhile

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        for pid in self._procs(self.main):
            self._move(pid, self.pod)
        for d in (self.main, self.side):
            deadline = time.monotonic() + 5
            while os.path.isdir(d) and time.monotonic() < deadline:
                try:
                    os.rmdir(d)
                except OSError:
                    time.sleep(0.05)


class ReportLog:
    """A proxy in front of the report endpoint (on the node's address, where pods reach it)
    that logs every report and its answer (JSON lines: monotonic time, request, response)
    for --log-reports. Its URL is known before the operator starts (the operator's
    --report-url); the upstream is set once the operator is up."""

    def __init__(self, host, path):
        out, lock = open(path, "w"), threading.Lock()
        self.upstream = None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                t = time.monotonic()
                req = urllib.request.Request(proxy.upstream + self.path, data=body, method="POST")
                for k in ("Authorization", "Content-Type"):
                    if self.headers.get(k):
                        req.add_header(k, self.headers[k])
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        code, answer = r.status, r.read()
                except urllib.error.HTTPError as e:
                    code, answer = e.code, e.read()
                except urllib.error.URLError:
                    # The operator stopped (the run is ending); the worker retries.
                    self.send_response(502)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with lock:
                    out.write(json.dumps({"t": t, "report": json.loads(body),
                                          "answer": json.loads(answer or b"null")}) + "\n")
                    out.flush()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Run:
    """One job in a namespace of its own: the operator, the 4 worker pods on the test node,
    and (unless clean) a neighbor."""

    def __init__(self, args, cluster, index, clean):
        self.args, self.cluster, self.index, self.clean = args, cluster, index, clean
        self.api = cluster.api
        self.dir = tempfile.mkdtemp(prefix="star-opdetect-")
        self.ns = f"opdetect-{uuid.uuid4().hex[:8]}"
        self.operator, self.neighbor_, self.report_log, self.made_ns = None, None, None, False
        self.build = os.path.abspath(args.build)

    def control_plane(self):
        c = self.cluster
        c.kubectl("create", "namespace", self.ns)
        self.made_ns = True
        # Pods need the namespace's default ServiceAccount, which the controller manager makes.
        wait_for(f"the default ServiceAccount of {self.ns}",
                 lambda: self.api.get(f"/api/v1/namespaces/{self.ns}/serviceaccounts/default"), 60)
        listen = f"{c.node_ip}:0"
        url = []
        if self.args.log_reports:
            # Pods get the proxy's URL; the operator listens on a port picked here.
            self.report_log = ReportLog(c.node_ip, os.path.join(self.dir, "reports.jsonl"))
            with socket.socket() as free:
                free.bind((c.node_ip, 0))
                listen = f"{c.node_ip}:{free.getsockname()[1]}"
            self.report_log.upstream = "http://" + listen
            url = ["--report-url", self.report_log.url]
        argv = [os.path.join(self.build, "operator/star-operator"), "--kubeconfig", c.kubeconfig,
                "--namespace", self.ns, "--report-listen", listen, *url, "--metrics-listen", "",
                "--status-interval", self.args.status_interval]
        self.operator = subprocess.Popen(argv, text=True, stdout=subprocess.PIPE,
                                         stderr=open(os.path.join(self.dir, "star-operator.log"), "w"),
                                         start_new_session=True)
        wait_line(self.operator, r"report-url (\S+)", 60)
        with open(os.path.join(ROOT, "examples/fmnist-job.yaml")) as f:
            job = f.read().replace("namespace: default", f"namespace: {self.ns}")
        if self.args.env:
            # env(1) over the pod's environment: the operator's own variables would win over
            # the template's.
            fmnist = os.path.join(self.build, "training-shim/examples/fmnist/star-fmnist")
            command = ["/usr/bin/env"] + [f"{k}={v}" for k, v in self.args.env] + [fmnist]
            job = job.replace(f"image: {IMAGE}", f"image: {IMAGE}\n            command: {json.dumps(command)}")
        c.kubectl("apply", "-f", "-", stdin=job)

    def pods(self):
        got = self.api.get(f"/api/v1/namespaces/{self.ns}/pods?labelSelector=" +
                           urllib.parse.quote(f"star.dev/job={JOB}"))
        items = [p for p in (got or {}).get("items", []) if p["status"].get("phase") == "Running"]
        return sorted(items, key=lambda p: p["metadata"]["name"]) if len(items) == 4 else None

    def workers(self):
        self.running = wait_for("the operator's 4 pods to run", self.pods, 120)
        self.logs = [self.cluster.container_log(p, p["spec"]["containers"][0]["name"]) for p in self.running]
        return time.monotonic()

    def trained(self):
        """Whether every worker has printed its startup line (after its first iteration)."""
        for log in self.logs:
            try:
                with open(log) as f:
                    if "startup (job clock)" not in f.read():
                        return False
            except FileNotFoundError:
                return False
        return True

    def neighbor(self):
        pod = self.running[self.args.worker]
        argv = [os.path.join(self.build, "cli/star"), "busy", "--threads", str(self.args.threads),
                "--seconds", str(self.args.watch + 30)]
        self.neighbor_ = Neighbor(self.cluster.pod_cgroup(pod), argv, self.args.threads,
                                  open(os.path.join(self.dir, "neighbor.log"), "w"))
        return time.monotonic()

    def flagged(self):
        """Workers in StragglerDetected Events and in status.stragglers[]."""
        events = self.api.get(f"/api/v1/namespaces/{self.ns}/events") or {}
        by_event = set()
        for e in events.get("items", []):
            if e.get("reason") == "StragglerDetected":
                m = re.match(r"worker (\d+)", e.get("message", ""))
                by_event.add(int(m.group(1)) if m else -1)
        tj = self.api.get(f"/apis/star.dev/v1alpha1/namespaces/{self.ns}/trainingjobs/{JOB}") or {}
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
        if self.neighbor_:
            self.neighbor_.close()
        if self.args.keep:
            for i, log in enumerate(getattr(self, "logs", [])):
                if os.path.exists(log):
                    shutil.copy(log, os.path.join(self.dir, f"worker-{i}.log"))
        c = self.cluster
        if self.operator:
            # The job goes while the operator runs: it removes its finalizer.
            c.kubectl("delete", "tj", "--all", "-n", self.ns, "--timeout=60s", check=False)
            self.operator.send_signal(signal.SIGTERM)
            try:
                self.operator.wait(10)
            except subprocess.TimeoutExpired:
                self.operator.kill()
                self.operator.wait()
        if self.made_ns:
            c.kubectl("patch", "tj", JOB, "-n", self.ns, "--type", "merge", "-p",
                      '{"metadata":{"finalizers":null}}', check=False)
            c.kubectl("delete", "namespace", self.ns, "--timeout=120s", check=False)
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
    ap.add_argument("--cluster", help="a cluster of scripts/cluster.sh already up, with the CRDs "
                    "and star-fmnist mapped (default: start one in a temporary directory, removed after)")
    ap.add_argument("--runs", type=int, default=3, help="runs with a neighbor")
    ap.add_argument("--clean-runs", type=int, default=1, help="runs without one (false alarms)")
    ap.add_argument("--worker", type=int, default=2, choices=range(4), help="the neighbor's worker")
    ap.add_argument("--threads", type=int, default=3, help="the neighbor's busy threads")
    ap.add_argument("--onset", type=float, default=3, help="seconds after every first iteration")
    ap.add_argument("--watch", type=float, default=30, help="seconds to watch after the onset")
    ap.add_argument("--status-interval", default="2s", help="star-operator --status-interval")
    ap.add_argument("--out", help="write every run here (JSON)")
    ap.add_argument("--env", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="set this in every worker's environment, over the pod's (an experiment; "
                    "the container's command is then env(1) and star-fmnist)")
    ap.add_argument("--log-reports", action="store_true",
                    help="log every report and its answer through a proxy (reports.jsonl; use with --keep)")
    ap.add_argument("--keep", action="store_true", help="keep each run's logs (the path is printed)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        fail("needs root (the test node's network namespaces and cgroups)")
    args.build = os.path.abspath(args.build)
    for binary in ("operator/star-operator", "cli/star", "training-shim/examples/fmnist/star-fmnist"):
        if not os.access(os.path.join(args.build, binary), os.X_OK):
            fail(f"{binary} is not built in {args.build}")
    if args.cluster:
        cluster = Cluster(args.cluster, args.build, own=False)
    else:
        cluster = Cluster(tempfile.mkdtemp(prefix="star-opdetect-cluster-"), args.build, own=True)
    results = []
    try:
        for i in range(args.runs + args.clean_runs):
            run = Run(args, cluster, i, clean=i >= args.runs)
            try:
                results.append(run.measure())
            finally:
                run.close()
            r = results[-1]
            print(f"run {i} ({'clean' if r['clean'] else 'neighbor on worker %d' % args.worker}): first iteration "
                  f"{r['first_iteration_s']} s after the pods ran; flagged after the onset: "
                  f"Event {r['event_s']}, status {r['status_s']}", flush=True)
    finally:
        cluster.close()
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
