#!/usr/bin/python3
"""One tenant against another on a shared cluster: the tenant of namespace A, with rights
to TrainingJobs and pods in A and nothing else, attacks the job of namespace B while it
trains, through everything a tenant can reach: oversized jobs, edits of its own job's
annotations, forged and replayed reports, the rendezvous store of B's job, pods that
squat STAR's labels, a 10 MB report body, and a flood of reports. One star-operator
watches every namespace (the chart's default) and star-agent runs on the test node, both
under the chart's RBAC.

Goal: B's job trains to its target unharmed (no restart, its pods' CPU never lowered),
the operator never restarts and its peak memory stays under the chart's limit. The
numbers go to stdout and, when STAR_ABUSE_RESULTS names a file, there (bench/abuse).

Environment: that of tests/k8s (k8s.py), STAR_OPERATOR_BINARY, STAR_AGENT_BINARY;
STAR_ABUSE_FLOOD_SECONDS (default 60), STAR_ABUSE_FLOOD_RATE (default 1000) and
STAR_ABUSE_ATTACKS (0: no attack, the victim's baseline).
"""
import base64
import contextlib
import json
import os
import socket
import ssl
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s  # noqa: E402
from daemon import ChartRbac, DaemonStack  # noqa: E402
from tenant import Tenant  # noqa: E402

OPERATOR = os.environ.get("STAR_OPERATOR_BINARY", "")
AGENT = os.environ.get("STAR_AGENT_BINARY", "")
FLOOD_SECONDS = int(os.environ.get("STAR_ABUSE_FLOOD_SECONDS", "60"))
FLOOD_RATE = int(os.environ.get("STAR_ABUSE_FLOOD_RATE", "1000"))
# 0: the same jobs with no attack (the victim's baseline time, for bench/abuse).
ATTACKS = os.environ.get("STAR_ABUSE_ATTACKS", "1") != "0"
VICTIM, ATTACKER = "victim", "attacker"
VICTIM_CPU = 400
VICTIM_ITERATIONS = 400
STORE_PORT = 29500


def job(name, ns, workers, cpu_millis, iterations, batch=64):
    return {
        "apiVersion": "star.dev/v1alpha1", "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "architecture": "AllReduce",
            "workers": {"replicas": workers, "template": {"spec": {"containers": [{
                "name": "trainer", "image": "ghcr.io/star-dev/fmnist:0.1",
                "resources": {"requests": {"cpu": f"{cpu_millis}m"}, "limits": {"cpu": f"{cpu_millis}m"}}}]}}},
            "training": {"globalBatchSize": batch, "maxIterations": iterations},
            "synchronization": {"policy": "SSGD"},
            "mitigation": {"detection": {"window": 5}, "resourceReallocation": {"enabled": True}},
        },
    }


def chart_values():
    with open(os.path.join(k8s.SOURCE, "helm", "star", "values.yaml")) as f:
        return yaml.safe_load(f)


def mebibytes(quantity):
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    for suffix, scale in units.items():
        if quantity.endswith(suffix):
            return float(quantity[:-len(suffix)]) * scale
    return float(quantity) / (1 << 20)


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


def env_of(pod, name):
    for c in pod["spec"]["containers"]:
        for e in c.get("env", []):
            if e["name"] == name:
                return e.get("value")
    return None


class Http:
    """POSTs to the report endpoint (and the store) as an outsider would."""

    def __init__(self, ca_pem):
        self.ctx = ssl.create_default_context(cadata=ca_pem) if ca_pem else None

    def post(self, url, body, token=None, content_length=None):
        """(status, body) of a POST; the status is 0 when the connection broke."""
        req = urllib.request.Request(url, data=body, method="POST")
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", "Bearer " + token)
        if content_length is not None:
            req.add_header("Content-Length", str(content_length))
        try:
            with urllib.request.urlopen(req, timeout=30, context=self.ctx) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except (urllib.error.URLError, ConnectionError) as e:
            return 0, str(e)


class Abuse(DaemonStack):
    """Namespaces O (the operator's), A (the attacker's) and B (the victim's); the chart's
    RBAC for a cluster-wide operator; star-agent and star-operator."""

    def __enter__(self):
        super().__enter__()
        self.tmp = self.enter_context(tempfile.TemporaryDirectory())
        self.numbers = {}
        self.ops = self.enter_context(k8s.Namespace("abuse-op"))
        self.a = self.enter_context(k8s.Namespace("abuse-a"))
        self.b = self.enter_context(k8s.Namespace("abuse-b"))
        for ns in (self.a.name, self.b.name):
            self.callback(self.release_jobs, ns)
        self.rbac = ChartRbac("star-" + self.ops.name, self.ops.name)
        self.callback(self.rbac.delete)
        self.tenant = Tenant(self.a.name, self.tmp)
        return self

    def start_daemons(self):
        self.start_agent(AGENT, self.ops.name)
        # As the chart runs it: HTTPS with the operator's own certificate, in the Secret its
        # RBAC names.
        self.report_url = self.start_operator(OPERATOR, self.ops.name, "", [self.a.name, self.b.name],
                                              ["--report-tls-secret", self.tls_secret()])

    def operator_pid(self):
        return self.daemons["operator"].proc.pid

    def operator_alive(self):
        return self.daemons["operator"].proc.poll() is None

    def pods(self, ns, name):
        lst = k8s.get_json("pods", "-n", ns, "-l", f"star.dev/job={name}")
        return sorted(lst["items"], key=lambda p: p["metadata"]["name"]) if lst else []

    def running(self, ns, name, n):
        pods = [p for p in self.pods(ns, name) if p["status"].get("phase") == "Running"]
        return pods if len(pods) == n else None

    def job(self, ns, name):
        return k8s.get_json("tj", name, "-n", ns) or {}

    def token(self, ns, name):
        secret = k8s.get_json("secret", f"{name}-token", "-n", ns)
        return base64.b64decode(secret["data"]["token"]).decode()

    def logs(self):
        out = [f"--- {n}\n{d.logs()[-3000:]}" for n, d in self.daemons.items()]
        for ns in (self.a.name, self.b.name):
            out.append(f"--- events {ns}\n" + k8s.kubectl("get", "events", "-n", ns,
                                                          "--sort-by=.lastTimestamp").stdout[-3000:])
        return "\n".join(out)

    def wait(self, ok, timeout, what):
        def check():
            if not self.operator_alive():
                raise AssertionError("star-operator exited\n" + self.logs())
            return ok()
        return k8s.eventually(check, timeout=timeout, what=what, fail=self.logs)

    def reports_url(self, ns, name):
        return f"{self.report_url}/v1/jobs/{urllib.parse.quote(ns + '/' + name, safe='')}/reports"


def report(job_key, worker=0, iteration=1):
    return json.dumps({"job": job_key, "worker": worker, "iteration": iteration, "iterations": 1,
                       "time_seconds": 1.0, "compute_seconds": 0.1, "communication_seconds": 0.01,
                       "wait_seconds": 0.0, "local_batch": 32, "amp": False}).encode()


@unittest.skipUnless(OPERATOR and AGENT, "STAR_OPERATOR_BINARY and STAR_AGENT_BINARY are needed")
class AbuseTest(unittest.TestCase):
    def test_a_tenant_cannot_harm_another_tenants_job_or_the_operator(self):
        with Abuse() as env:
            self.env = env
            env.start_daemons()
            self.start_jobs()
            if ATTACKS:
                self.attack()
            self.victim_trains_to_its_target()
            self.operator_stays_within_its_limit()
            self.publish()

    def attack(self):
        flood = self.start_flood()
        self.oversized_jobs()
        self.annotation_edits()
        self.forged_and_replayed_reports()
        self.store_overwrites()
        self.label_squatting_pods()
        self.huge_report_body()
        flood.join()
        self.assertEqual(flood.error, None, flood.error)

    # --- the two jobs

    def start_jobs(self):
        env = self.env
        start = time.monotonic()
        k8s.kubectl_ok("apply", "-f", "-",
                       stdin=json.dumps(job(VICTIM, env.b.name, 2, VICTIM_CPU, VICTIM_ITERATIONS)))
        self.victim_started = start
        proc = env.tenant.apply(job(ATTACKER, env.a.name, 1, 200, 1000000))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.victim_pods = env.wait(lambda: env.running(env.b.name, VICTIM, 2), 180, "the victim's workers")
        self.attacker_pods = env.wait(lambda: env.running(env.a.name, ATTACKER, 1), 180, "the attacker's worker")
        self.victim_quota = {p["metadata"]["uid"]: VICTIM_CPU for p in self.victim_pods}
        self.ca = env_of(self.attacker_pods[0], "STAR_REPORT_CA")
        self.http = Http(self.ca)
        self.attacker_token = env.token(env.a.name, ATTACKER)

    # --- the attacks

    def oversized_jobs(self):
        """The API server refuses a job past the CRD's bounds; the largest job it admits,
        in a namespace whose quota allows 4 pods, costs the operator little."""
        env = self.env
        huge = job("huge", env.a.name, 50000000, 100, 100)
        proc = env.tenant.apply(huge)
        self.assertNotEqual(proc.returncode, 0, "replicas 50000000 was admitted")
        self.assertIn("replicas", proc.stderr)
        schema = self.crd_schema()
        most = schema["workers"]["properties"]["replicas"]["maximum"]
        k8s.kubectl_ok("create", "quota", "pods", "--hard=pods=4", "-n", env.a.name)
        proc = env.tenant.apply(job("largest", env.a.name, most, 100, 100, batch=most * 64))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.env.numbers["largest_admitted_replicas"] = most
        env.wait(lambda: env.job(env.a.name, "largest").get("status", {}).get("phase"), 120,
                 "the operator to reconcile the largest job")
        self.assertEqual(env.tenant.kubectl("delete", "tj", "largest", "--timeout=120s").returncode, 0)
        env.wait(lambda: not env.pods(env.a.name, "largest"), 120, "the largest job's pods to go")
        k8s.kubectl_ok("delete", "quota", "pods", "-n", env.a.name)

    def crd_schema(self):
        crd = k8s.get_json("crd", "trainingjobs.star.dev")
        version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
        return version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]

    def annotation_edits(self):
        """The attacker's job's annotation naming the victim's pod changes nothing: the
        operator reconciles the edit (its observedGeneration follows a spec change made in
        the same patch) and the victim's allocation stays. Where the plans live (the
        NodeAllocations) is out of the tenant's reach."""
        env = self.env
        for verb in ("get", "patch", "update"):
            self.assertFalse(env.tenant.can(verb, "nodeallocations.star.dev", env.a.name), verb)
        target = self.victim_pods[0]
        plan = {"pods": {target["metadata"]["uid"]: {"node": k8s.node_name(), "job": f"{env.b.name}/{VICTIM}",
                                                       "cpu": 1, "bps": 0}}}
        patch = {"metadata": {"annotations": {"star.dev/reallocation": json.dumps(plan)}},
                 "spec": {"mitigation": {"detection": {"window": 6}}}}
        proc = env.tenant.kubectl("patch", "tj", ATTACKER, "--type", "merge", "-p", json.dumps(patch))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        generation = env.job(env.a.name, ATTACKER)["metadata"]["generation"]
        env.wait(lambda: env.job(env.a.name, ATTACKER).get("status", {}).get("observedGeneration", 0) >= generation,
                 120, "the operator to reconcile the edited job")
        self.assert_victim_allocation()

    def assert_victim_allocation(self):
        na = k8s.get_json("nodeallocation", k8s.node_name()) or {"spec": {"pods": []}}
        for p in na["spec"].get("pods", []):
            want = self.victim_quota.get(p["uid"])
            if want is not None:
                self.assertGreaterEqual(p["cpu"]["quotaMillicores"], want, f"victim pod {p['uid']} throttled")

    def forged_and_replayed_reports(self):
        """A report for the victim's job with the attacker's token, or with none, is
        refused exactly as one for a job that does not exist; the attacker's own reports
        replayed, or with an absurd iteration, do not take the endpoint down."""
        env = self.env
        victim_url = env.reports_url(env.b.name, VICTIM)
        unknown_url = env.reports_url(env.b.name, "nosuchjob")
        forged = self.http.post(victim_url, report(f"{env.b.name}/{VICTIM}"), self.attacker_token)
        unknown = self.http.post(unknown_url, report(f"{env.b.name}/nosuchjob"), self.attacker_token)
        anonymous = self.http.post(victim_url, report(f"{env.b.name}/{VICTIM}"))
        self.assertEqual(forged[0], 401, forged)
        self.assertEqual(forged, unknown, "a forged report tells which jobs exist")
        self.assertEqual(anonymous, unknown)
        own = env.reports_url(env.a.name, ATTACKER)
        key = f"{env.a.name}/{ATTACKER}"
        replies = [self.http.post(own, report(key, iteration=5), self.attacker_token)[0] for _ in range(50)]
        replies.append(self.http.post(own, report(key, iteration=2**63 - 1), self.attacker_token)[0])
        self.assertNotIn(0, replies, "the endpoint dropped a connection")
        self.assertNotIn(500, replies)
        self.env.numbers["forged_report_status"] = forged[0]

    def store_overwrites(self):
        """The victim's rendezvous store refuses writes without the victim's token."""
        env = self.env
        ip = self.victim_pods[0]["status"]["podIP"]
        env.wait(lambda: self.listening(ip, STORE_PORT), 120, "the victim's store to listen")
        for token in (None, self.attacker_token):
            status, body = self.http_plain(f"http://{ip}:{STORE_PORT}/kv/rank0", b"evil", token)
            self.assertEqual(status, 401, f"store write with token {token is not None}: {status} {body}")

    @staticmethod
    def listening(host, port):
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=5):
            return True
        return False

    def http_plain(self, url, body, token):
        req = urllib.request.Request(url, data=body, method="PUT")
        if token:
            req.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def label_squatting_pods(self):
        """Pods that wear STAR's labels but that no TrainingJob controls are not the
        operator's: a failing squatter restarts no gang, and is not deleted."""
        env = self.env
        squatters = []
        for name, job_name in (("squat-own", ATTACKER), ("squat-victim", VICTIM)):
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "labels": {"star.dev/job": job_name, "star.dev/rank": "0",
                                                         "star.dev/role": "worker"}},
                   "spec": {"restartPolicy": "Never", "containers": [{
                       "name": "c", "image": "busybox", "command": ["/bin/false"],
                       "resources": {"limits": {"cpu": "50m"}}}]}}
            proc = env.tenant.apply(pod)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            squatters.append(name)

        def failed():
            pods = [k8s.get_json("pod", n, "-n", env.a.name) for n in squatters]
            if None in pods:
                raise AssertionError(f"the operator deleted a squatter: {squatters}, found {pods}")
            return all(p["status"].get("phase") == "Failed" for p in pods)
        env.wait(failed, 120, "the squatters to fail")
        # A spec change reconciled after the squatters failed: the operator has seen them.
        self.reconcile_attacker({"spec": {"mitigation": {"detection": {"window": 7}}}})
        for n in squatters:
            self.assertIsNotNone(k8s.get_json("pod", n, "-n", env.a.name), f"the operator deleted {n}")
        for ns, name in ((env.a.name, ATTACKER), (env.b.name, VICTIM)):
            restarts = env.job(ns, name)["metadata"].get("annotations", {}).get("star.dev/restarts")
            self.assertIn(restarts, (None, "0"), f"{ns}/{name} restarted by a squatter")

    def reconcile_attacker(self, patch):
        env = self.env
        proc = env.tenant.kubectl("patch", "tj", ATTACKER, "--type", "merge", "-p", json.dumps(patch))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        generation = env.job(env.a.name, ATTACKER)["metadata"]["generation"]
        env.wait(lambda: env.job(env.a.name, ATTACKER).get("status", {}).get("observedGeneration", 0) >= generation,
                 120, "the operator to reconcile the attacker's job")

    def huge_report_body(self):
        """A 10 MB body is refused without being read; the endpoint answers the next report."""
        env = self.env
        own = env.reports_url(env.a.name, ATTACKER)
        status, _ = self.http.post(own, b"x" * (10 << 20), self.attacker_token)
        self.assertEqual(status, 413, f"a 10 MB body got {status}")
        after = self.http.post(own, report(f"{env.a.name}/{ATTACKER}", iteration=6), self.attacker_token)
        self.assertNotIn(after[0], (0, 500), after)
        self.env.numbers["huge_body_status"] = status

    def start_flood(self):
        """FLOOD_RATE reports a second for FLOOD_SECONDS, with the attacker's own token."""
        env = self.env
        body = os.path.join(env.tmp, "report.json")
        with open(body, "wb") as f:
            f.write(report(f"{env.a.name}/{ATTACKER}", iteration=7))
        argv = [os.path.join(k8s.CLUSTER, "bin", "star-flood"), "--url", env.reports_url(env.a.name, ATTACKER),
                "--token", self.attacker_token, "--body-file", body, "--rate", str(FLOOD_RATE),
                "--duration", f"{FLOOD_SECONDS}s", "--conns", "32"]
        if self.ca:
            ca = os.path.join(env.tmp, "report-ca.pem")
            with open(ca, "w") as f:
                f.write(self.ca)
            argv += ["--ca-file", ca]
        flood = threading.Thread(target=self.flood, args=(argv,), daemon=True)
        flood.error = None
        flood.start()
        return flood

    def flood(self, argv):
        t = threading.current_thread()
        p = k8s.run(argv, timeout=FLOOD_SECONDS + 120)
        if p.returncode != 0:
            t.error = f"star-flood exited {p.returncode}: {p.stderr}"
            return
        res = json.loads(p.stdout)
        self.env.numbers["flood"] = res
        if res["errors"]:
            t.error = f"the endpoint dropped {res['errors']} of {res['sent']} requests: {res.get('first_error')}"

    # --- the outcome

    def victim_trains_to_its_target(self):
        env = self.env
        env.wait(lambda: env.job(env.b.name, VICTIM).get("status", {}).get("phase") in ("Succeeded", "Failed"),
                 900, "the victim's job to finish")
        st = env.job(env.b.name, VICTIM)
        self.assertEqual(st["status"]["phase"], "Succeeded", json.dumps(st.get("status"), indent=1))
        self.assertIn(st["metadata"].get("annotations", {}).get("star.dev/restarts"), (None, "0"))
        self.assert_victim_allocation()
        self.env.numbers["victim_seconds"] = round(time.monotonic() - self.victim_started, 1)
        self.env.numbers["victim_iteration"] = st["status"].get("iteration")

    def operator_stays_within_its_limit(self):
        env = self.env
        self.assertTrue(env.operator_alive(), "star-operator exited\n" + env.logs())
        limit = mebibytes(chart_values()["operator"]["resources"]["limits"]["memory"])
        peak = peak_rss_mib(env.operator_pid())
        self.env.numbers["operator_peak_rss_mib"] = round(peak, 1)
        self.env.numbers["operator_memory_limit_mib"] = limit
        self.assertLess(peak, limit, "star-operator's peak memory")

    def publish(self):
        line = json.dumps(self.env.numbers, sort_keys=True)
        print("abuse numbers: " + line, flush=True)
        path = os.environ.get("STAR_ABUSE_RESULTS")
        if path:
            with open(path, "w") as f:
                f.write(line + "\n")


if __name__ == "__main__":
    unittest.main()
