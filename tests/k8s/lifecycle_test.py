#!/usr/bin/python3
"""A TrainingJob's whole life on the real API server, with star-operator and star-agent
running under the ServiceAccounts and RBAC that the chart renders (tokens from the
TokenRequest API): pods created and run by the test node (the real trainer), a worker
slowed by a neighbor in its cgroup flagged as a straggler, CPU moved to it through a
NodeAllocation that star-agent applies to the pod's cgroup, a killed worker restarting
the gang, and deletion cascading to the pods. Neither daemon may see a 403.

Environment: that of tests/k8s (k8s.py), STAR_OPERATOR_BINARY, STAR_AGENT_BINARY.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s  # noqa: E402
from daemon import ChartRbac, Daemon, token_kubeconfig  # noqa: E402

OPERATOR = os.environ.get("STAR_OPERATOR_BINARY", "")
AGENT = os.environ.get("STAR_AGENT_BINARY", "")
JOB = "life"
WORKERS = 3
CPU_MILLIS = 300


def job_manifest(ns):
    return {
        "apiVersion": "star.dev/v1alpha1", "kind": "TrainingJob",
        "metadata": {"name": JOB, "namespace": ns},
        "spec": {
            "architecture": "AllReduce",
            "workers": {"replicas": WORKERS, "template": {"spec": {"containers": [{
                "name": "trainer", "image": "ghcr.io/star-dev/fmnist:0.1",
                "resources": {"requests": {"cpu": f"{CPU_MILLIS}m"}, "limits": {"cpu": f"{CPU_MILLIS}m"}}}]}}},
            "training": {"globalBatchSize": 192, "maxIterations": 100000},
            "synchronization": {"policy": "SSGD"},
            "mitigation": {"detection": {"window": 5},
                           "resourceReallocation": {"enabled": True}},
        },
    }


def subnet():
    with open(os.path.join(k8s.CLUSTER, "subnet")) as f:
        return f.read().strip()


def pod_cgroup(pod):
    qos = {"Guaranteed": "", "Burstable": "burstable/", "BestEffort": "besteffort/"}[pod["status"]["qosClass"]]
    return f"/sys/fs/cgroup/cpu/star-node-{subnet()}/kubepods/{qos}pod{pod['metadata']['uid']}"


def read(path):
    with open(path) as f:
        return f.read().strip()


@unittest.skipUnless(OPERATOR and AGENT, "STAR_OPERATOR_BINARY and STAR_AGENT_BINARY are needed")
class LifecycleTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.ns = k8s.Namespace("life")
        self.ns.__enter__()
        self.addCleanup(self.ns.__exit__)
        release = "star-" + self.ns.name
        self.rbac = ChartRbac(release, self.ns.name, [f"operator.watchNamespace={self.ns.name}"])
        self.addCleanup(self.rbac.delete)
        self.daemons = {}

    def start(self, name, argv):
        d = Daemon(argv, os.path.join(self.tmp.name, name + ".log"))
        self.daemons[name] = d
        self.addCleanup(d.stop)
        return d

    def start_agent(self):
        kc = token_kubeconfig(os.path.join(self.tmp.name, "agent.kubeconfig"), self.rbac.accounts["agent"], self.ns.name)
        self.start("agent", [AGENT, "--node", k8s.node_name(), "--kubeconfig", kc,
                             "--cgroup-root", f"star-node-{subnet()}", "--driver", "cgroupfs",
                             "--journal", os.path.join(self.tmp.name, "journal.json"),
                             "--metrics-address", "", "--poll-ms", "200"])

    def start_operator(self):
        kc = token_kubeconfig(os.path.join(self.tmp.name, "operator.kubeconfig"),
                              self.rbac.accounts["operator"], self.ns.name)
        op = self.start("operator", [OPERATOR, "--kubeconfig", kc, "--namespace", self.ns.name,
                                     "--report-listen", k8s.node_ip() + ":0", "--metrics-listen", "",
                                     "--status-interval", "500ms", "--restart-backoff", "100ms",
                                     "--max-restarts", "3"])
        self.assertIsNotNone(op.wait_line("report-url ", 60), op.logs())
        # Runs before the operator stops: its finalizer must be handled while it runs.
        self.addCleanup(k8s.kubectl, "delete", "tj", "--all", "-n", self.ns.name, "--timeout=60s")

    def pods(self):
        lst = k8s.get_json("pods", "-n", self.ns.name, "-l", f"star.dev/job={JOB}")
        return sorted(lst["items"], key=lambda p: p["metadata"]["name"]) if lst else []

    def running_pods(self):
        pods = [p for p in self.pods() if p["status"].get("phase") == "Running"]
        return pods if len(pods) == WORKERS else None

    def job(self):
        return k8s.get_json("tj", JOB, "-n", self.ns.name) or {}

    def logs(self):
        pods = [(p["metadata"]["name"], p["status"]) for p in self.pods()]
        return "\n".join([f"--- {n}\n{d.logs()[-3000:]}" for n, d in self.daemons.items()] +
                         [f"--- pods\n{json.dumps(pods, indent=1)[-4000:]}"])

    def test_a_job_lives_and_dies_with_the_charts_permissions(self):
        self.start_agent()
        self.start_operator()
        k8s.kubectl_ok("apply", "-f", "-", stdin=json.dumps(job_manifest(self.ns.name)))
        pods = k8s.eventually(self.running_pods, timeout=120, what="the workers to run", fail=self.logs)
        k8s.eventually(lambda: self.job().get("status", {}).get("iteration", 0) > 5, timeout=180,
                       what="the workers' reports to reach the job's status")
        self.straggler_gets_cpu(pods[1])
        self.a_killed_worker_restarts_the_gang(pods[2])
        k8s.kubectl_ok("delete", "tj", JOB, "-n", self.ns.name, "--timeout=120s", timeout=150)
        k8s.eventually(lambda: not self.pods(), timeout=120, what="the pods to go with their job")
        for name, d in self.daemons.items():
            self.assertNotRegex(d.logs(), re.compile(r"\b403\b|forbidden", re.I), f"{name} was refused")

    def straggler_gets_cpu(self, pod):
        cgroup = pod_cgroup(pod)
        original = int(read(cgroup + "/cpu.cfs_quota_us"))
        self.assertEqual(original, CPU_MILLIS * 100)
        # Two busy neighbors in the worker's cgroup take most of its quota.
        hogs = [subprocess.Popen(["/bin/sh", "-c", f"echo $$ > {cgroup}/cgroup.procs && exec sh -c 'while :; do :; done'"])
                for _ in range(2)]
        for h in hogs:
            self.addCleanup(h.kill)
        rank = pod["metadata"]["labels"]["star.dev/rank"]
        k8s.eventually(lambda: any(str(s.get("worker")) == rank for s in self.job().get("status", {}).get("stragglers", [])),
                       timeout=120, what=f"worker {rank} flagged", fail=self.logs)
        # The operator plans more CPU for it; the agent writes it to the pod's cgroup and
        # reports it in the NodeAllocation's status.
        k8s.eventually(lambda: int(read(cgroup + "/cpu.cfs_quota_us")) > original, timeout=120,
                       what=f"a larger CPU quota for worker {rank}", fail=self.logs)
        na = k8s.get_json("nodeallocation", k8s.node_name())
        planned = [p for p in na["spec"]["pods"] if p["uid"] == pod["metadata"]["uid"]]
        self.assertEqual(len(planned), 1, na)
        self.assertGreater(planned[0]["cpu"]["quotaMillicores"], CPU_MILLIS)
        k8s.eventually(lambda: any(a.get("uid") == pod["metadata"]["uid"]
                                   for a in (k8s.get_json("nodeallocation", k8s.node_name())
                                             .get("status", {}).get("applied") or [])),
                       what="the agent's applied status")
        for h in hogs:
            h.send_signal(signal.SIGKILL)
            h.wait()

    def a_killed_worker_restarts_the_gang(self, pod):
        before = {p["metadata"]["uid"] for p in self.pods()}
        for pid in read(pod_cgroup(pod) + "/cgroup.procs").split():
            os.kill(int(pid), signal.SIGKILL)
        def replaced():
            pods = self.running_pods()
            return pods and not ({p["metadata"]["uid"] for p in pods} & before)
        k8s.eventually(replaced, timeout=180, what="a new gang", fail=self.logs)
        self.assertEqual(self.job()["metadata"]["annotations"].get("star.dev/restarts"), "1")


if __name__ == "__main__":
    unittest.main()
