#!/usr/bin/python3
"""star-faultproxy in front of the real API server, driven with kubectl: a 500 rule fails
exactly its count of requests, a 429 with Retry-After is retried by the client, latency
delays, a dropped watch ends `kubectl get -w` (by time, after K events, or reset), a
client's token reaches the API server and a client certificate is impersonated.

Environment: that of the k8s tests (tests/k8s/k8s.py) and STAR_FAULTPROXY, the binary
(default: the cluster's DIR/bin/star-faultproxy).
"""
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "k8s"))
import k8s  # noqa: E402


def upstream_server(kubeconfig):
    with open(kubeconfig) as f:
        for line in f:
            if line.strip().startswith("server:"):
                return line.split(":", 1)[1].strip()
    raise AssertionError(f"no server in {kubeconfig}")


class FaultProxy:
    """star-faultproxy in front of the cluster, with a kubeconfig through it (the admin's
    client certificate, which the proxy impersonates)."""

    def __init__(self, cluster_dir):
        pki = os.path.join(cluster_dir, "pki")
        binary = os.environ.get("STAR_FAULTPROXY") or os.path.join(cluster_dir, "bin", "star-faultproxy")
        self.dir = tempfile.mkdtemp(prefix="faultproxy-")
        self.stderr = open(os.path.join(self.dir, "proxy.log"), "w+")
        self.proc = subprocess.Popen(
            [binary, "--upstream", upstream_server(os.environ["KUBECONFIG"]),
             "--ca-cert", f"{pki}/ca.crt", "--ca-key", f"{pki}/ca.key",
             "--client-cert", f"{pki}/admin.crt", "--client-key", f"{pki}/admin.key"],
            stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.buf = ""
        self.control = self._line("control on ")
        self.url = self._line("listening on ")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster: {{server: "{self.url}", certificate-authority: "{pki}/ca.crt"}}
users:
- name: admin
  user: {{client-certificate: "{pki}/admin.crt", client-key: "{pki}/admin.key"}}
contexts:
- name: proxy
  context: {{cluster: proxy, user: admin}}
current-context: proxy
""")

    def _line(self, prefix, timeout=30):
        """The rest of the first stdout line starting with prefix. Reads the pipe itself:
        select() on a buffered reader misses lines already in its buffer."""
        deadline = time.monotonic() + timeout
        while True:
            while "\n" in self.buf:
                line, self.buf = self.buf.split("\n", 1)
                if line.startswith(prefix):
                    return line[len(prefix):].strip()
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                break
            chunk = os.read(self.proc.stdout.fileno(), 4096).decode()
            if not chunk:
                break
            self.buf += chunk
        raise AssertionError(f"star-faultproxy printed no '{prefix}...': {self.log()}")

    def log(self):
        self.stderr.flush()
        with open(self.stderr.name) as f:
            return f.read()

    def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.control + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def add(self, rule):
        code, body = self.request("POST", "/faults", rule)
        if code != 201:
            raise AssertionError(f"POST /faults {rule}: {code} {body}")
        return body["rules"][0]["id"]

    def rule(self, rule_id):
        _, body = self.request("GET", "/faults")
        return next(r for r in body["rules"] if r["id"] == rule_id)

    def stop(self):
        """Stops the proxy and removes its directory; returns its log."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        log = self.log()
        self.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return log


class FaultProxyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proxy = FaultProxy(k8s.CLUSTER)

    @classmethod
    def tearDownClass(cls):
        cls.proxy.stop()

    def setUp(self):
        self.assertEqual(self.proxy.request("DELETE", "/faults")[0], 200)

    def kubectl(self, *args, timeout=60):
        return k8s.kubectl(*args, kubeconfig=self.proxy.kubeconfig, timeout=timeout)

    def timed(self, *args, timeout=60):
        start = time.monotonic()
        p = self.kubectl(*args, timeout=timeout)
        return p, time.monotonic() - start

    def test_status_rule_fails_its_count_of_requests_then_the_request_succeeds(self):
        with k8s.Namespace("fp") as ns:
            rule = self.proxy.add({"verb": "list", "resource": "pods", "namespace": ns.name,
                                   "status": 500, "count": 2})
            for i in range(2):
                p = self.kubectl("get", "pods", "-n", ns.name)
                self.assertNotEqual(p.returncode, 0, f"request {i}: {p.stdout}")
                self.assertIn("InternalError", p.stderr)
                self.assertIn(f"injected by star-faultproxy (rule {rule})", p.stderr)
            p = self.kubectl("get", "pods", "-n", ns.name)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(self.kubectl("get", "configmaps", "-n", ns.name).returncode, 0,
                             "another resource is not affected")
            state = self.proxy.rule(rule)
            self.assertEqual((state["matched"], state["applied"]), (3, 2), state)

    def test_429_with_retry_after_is_retried_by_the_client(self):
        with k8s.Namespace("fp") as ns:
            rule = self.proxy.add({"verb": "get", "resource": "namespaces", "name": ns.name,
                                   "status": 429, "retryAfterSeconds": 1, "count": 2})
            p, took = self.timed("get", "namespace", ns.name)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertGreaterEqual(took, 2.0, "two Retry-After: 1 waits")
            state = self.proxy.rule(rule)
            self.assertEqual((state["matched"], state["applied"]), (3, 2), state)

    def test_latency_rule_delays_the_request(self):
        with k8s.Namespace("fp") as ns:
            self.proxy.add({"verb": "list", "resource": "configmaps", "namespace": ns.name, "latencyMs": 2000})
            p, took = self.timed("get", "configmaps", "-n", ns.name)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertGreaterEqual(took, 2.0)
            p, took = self.timed("get", "secrets", "-n", ns.name)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertLess(took, 2.0, "another resource is not delayed")

    def test_watch_dropped_after_a_time_ends_kubectl_get_w(self):
        with k8s.Namespace("fp") as ns:
            rule = self.proxy.add({"verb": "watch", "resource": "pods", "namespace": ns.name,
                                   "dropWatchAfterMs": 1500})
            p, took = self.timed("get", "pods", "-n", ns.name, "-w", timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertGreaterEqual(took, 1.5)
            self.assertLess(took, 30, "ended by the proxy, not by the API server's watch timeout")
            self.assertEqual(self.proxy.rule(rule)["applied"], 1)

    def test_watch_dropped_after_k_events_carries_exactly_k(self):
        with k8s.Namespace("fp") as ns:
            rule = self.proxy.add({"verb": "watch", "resource": "configmaps", "namespace": ns.name,
                                   "dropWatchAfterEvents": 2})
            watch = subprocess.Popen([k8s.KUBECTL, "--kubeconfig", self.proxy.kubeconfig, "get", "configmaps",
                                      "-n", ns.name, "-w", "--output-watch-events", "--no-headers"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                # kubectl lists, then watches from the list's resourceVersion: what is
                # created once the watch has reached the proxy comes as its events.
                k8s.eventually(lambda: self.proxy.rule(rule)["applied"] == 1, what="the watch to start")
                for i in range(3):
                    k8s.kubectl_ok("create", "configmap", f"c{i}", "-n", ns.name)
                out, err = watch.communicate(timeout=30)
            finally:
                if watch.poll() is None:
                    watch.kill()
                    watch.wait()
            self.assertEqual(watch.returncode, 0, err)
            added = [line.split()[1] for line in out.splitlines() if line.startswith("ADDED")]
            self.assertIn("c0", added)
            self.assertIn("c1", added)
            self.assertNotIn("c2", added, out)

    def test_aborted_watch_ends_kubectl_get_w_with_a_stream_error(self):
        with k8s.Namespace("fp") as ns:
            self.proxy.add({"verb": "watch", "resource": "pods", "namespace": ns.name,
                            "dropWatchAfterMs": 500, "abort": True})
            p, took = self.timed("get", "pods", "-n", ns.name, "-w", timeout=60)
            self.assertLess(took, 30)
            self.assertIn("stream error", p.stdout + p.stderr)
            self.assertIn("watch aborted after 500ms", self.proxy.log())

    def test_a_token_reaches_the_api_server_and_a_certificate_is_impersonated(self):
        with k8s.Namespace("fp") as ns:
            token = k8s.kubectl_ok("create", "token", "default", "-n", ns.name).strip()
            p = self.kubectl("auth", "whoami", "-o", "json", "--token", token)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(json.loads(p.stdout)["status"]["userInfo"]["username"],
                             f"system:serviceaccount:{ns.name}:default")
            p = self.kubectl("auth", "whoami", "-o", "json")
            self.assertEqual(p.returncode, 0, p.stderr)
            info = json.loads(p.stdout)["status"]["userInfo"]
            self.assertEqual(info["username"], "star-admin")
            self.assertIn("system:masters", info["groups"])

    def test_bad_rules_are_refused_naming_the_field(self):
        code, body = self.proxy.request("POST", "/faults", {"verb": "list", "resource": "pods",
                                                            "dropWatchAfterMs": 5})
        self.assertEqual(code, 400)
        self.assertIn("only with verb \"watch\"", body["error"])
        code, body = self.proxy.request("POST", "/faults", {"verb": "list", "resources": "pods"})
        self.assertEqual(code, 400)
        self.assertIn('unknown field "resources"', body["error"])


if __name__ == "__main__":
    unittest.main()
