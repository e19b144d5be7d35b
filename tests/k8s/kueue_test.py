#!/usr/bin/python3
"""Batch schedulers on the real API server, with star-operator under the chart's RBAC.

KueueTest: Kueue itself (its manager built from sigs.k8s.io/kueue by
scripts/kueue-tools.sh, run as a process with the pod integration, its CRDs installed for
the test) admits TrainingJobs labelled kueue.x-k8s.io/queue-name through its pod-group
integration: a ClusterQueue with room for one job; the second job waits, gated, with the
condition Admitted False in Kueue's words, and runs once the first is deleted; a job naming
a LocalQueue that does not exist waits with a condition saying so.

VolcanoTest: with Volcano's PodGroup CRD (generated from volcano.sh/apis) installed, a job
whose runPolicy.schedulerName is volcano gets a PodGroup with minMember = its pods, owned by
the job and gone with it; without the CRD the job waits with PodGroupReady False.

Environment: that of tests/k8s (k8s.py), STAR_OPERATOR_BINARY, STAR_KUEUE_TOOLS (where
scripts/kueue-tools.sh, run first, links Kueue and the CRDs; built once per version).
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import unittest
import urllib.request
import uuid

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s  # noqa: E402
from daemon import ChartRbac, Daemon, DaemonStack  # noqa: E402

OPERATOR = os.environ.get("STAR_OPERATOR_BINARY", "")
TOOLS = os.environ.get("STAR_KUEUE_TOOLS") or os.path.join(tempfile.gettempdir(), f"star-kueue-tools-{os.getuid()}")
CPU_MILLIS = 300
WORKERS = 2  # a job asks for 600m; the ClusterQueue has 1 CPU: room for one job


def setUpModule():
    if not OPERATOR:
        return
    p = k8s.run(["bash", os.path.join(k8s.SOURCE, "scripts", "kueue-tools.sh"), TOOLS], timeout=1500)
    if p.returncode != 0:
        raise AssertionError("scripts/kueue-tools.sh: " + p.stderr[-4000:])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_manifest(name, ns, queue=None, scheduler=None, ps=0):
    tmpl = {"spec": {"containers": [{
        "name": "main", "image": "debian", "command": ["sleep", "3600"],
        "resources": {"requests": {"cpu": f"{CPU_MILLIS}m"}, "limits": {"cpu": f"{CPU_MILLIS}m"}}}]}}
    job = {
        "apiVersion": "star.dev/v1alpha1", "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "architecture": "ParameterServer" if ps else "AllReduce",
            "workers": {"replicas": WORKERS, "template": tmpl},
            "training": {"globalBatchSize": 64},
        },
    }
    if ps:
        job["spec"]["parameterServers"] = {"replicas": ps, "template": tmpl}
    if queue:
        job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    if scheduler:
        job["spec"]["runPolicy"] = {"schedulerName": scheduler}
    return job


def apply(obj):
    k8s.kubectl_ok("apply", "-f", "-", stdin=json.dumps(obj))


def install_crds(directory):
    """Applies every CRD of `directory` and waits until established; returns their names."""
    files = [os.path.join(directory, f) for f in sorted(os.listdir(directory))]
    k8s.kubectl_ok("apply", "--server-side", *[a for f in files for a in ("-f", f)], timeout=180)
    names = []
    for f in files:
        with open(f) as fh:
            names.append(yaml.safe_load(fh)["metadata"]["name"])
    k8s.kubectl_ok("wait", "--for", "condition=established", "--timeout=60s", *[f"crd/{n}" for n in names])
    return names


def delete_crds(names):
    for n in names:
        k8s.kubectl("delete", "crd", n, "--ignore-not-found", "--timeout=60s")


class Stack(DaemonStack):
    """A namespace, the chart's RBAC for an operator watching it, and the operator."""

    def __enter__(self):
        super().__enter__()
        try:
            self.set_up()
        except BaseException:
            self.close()  # what was set up before the failure
            raise
        return self

    def set_up(self):
        self.tmp = self.enter_context(tempfile.TemporaryDirectory())
        self.ns = k8s.Namespace("sched")
        self.enter_context(self.ns)
        self.callback(self.release_jobs, self.ns.name)
        self.rbac = ChartRbac("star-" + self.ns.name, self.ns.name, [f"operator.watchNamespace={self.ns.name}"])
        self.callback(self.rbac.delete)

    def operator(self):
        self.start_operator(OPERATOR, self.ns.name, self.ns.name, [self.ns.name])

    def assert_never_forbidden(self):
        """The operator, under the chart's RBAC, was refused nothing (the API server's
        message for a 403 always says "forbidden")."""
        m = re.search(r".*\bforbidden\b.*", self.daemons["operator"].logs(), re.I)
        if m:
            raise AssertionError("star-operator: " + m.group(0))

    def job(self, name):
        return k8s.get_json("tj", name, "-n", self.ns.name) or {}

    def condition(self, name, type_):
        for c in self.job(name).get("status", {}).get("conditions", []):
            if c["type"] == type_:
                return c
        return None

    def pods(self, name):
        lst = k8s.get_json("pods", "-n", self.ns.name, "-l", f"star.dev/job={name}")
        return lst["items"] if lst else []

    def admitted(self, name, count):
        """The job's `count` pods exist and Kueue has lifted their admission gate (they may
        still wait for room on a node the suite's other tests share)."""
        pods = self.pods(name)
        return len(pods) == count and not any(
            g.get("name") == "kueue.x-k8s.io/admission" for p in pods for g in p["spec"].get("schedulingGates", []))

    def logs(self):
        parts = [f"--- {n}\n{d.logs()[-4000:]}" for n, d in self.daemons.items()]
        pods = (k8s.get_json("pods", "-n", self.ns.name) or {}).get("items", [])
        parts.append("--- pods\n" + json.dumps([(p["metadata"]["name"], p["spec"].get("nodeName"),
                                                  p["spec"].get("schedulingGates"), p["status"]) for p in pods],
                                                 indent=1)[-4000:])
        for tj in (k8s.get_json("tj", "-n", self.ns.name) or {}).get("items", []):
            parts.append(f"--- tj {tj['metadata']['name']}\n{json.dumps(tj.get('status'), indent=1)[-2000:]}")
        return "\n".join(parts)

    def wait(self, ok, timeout, what):
        return k8s.eventually(ok, timeout=timeout, what=what, fail=self.logs)


class KueueStack(Stack):
    """Stack, plus Kueue's CRDs and its manager (pod integration, no leader election,
    webhooks served with a self-signed certificate but not registered: the operator's pods
    carry what Kueue's pod webhook would add), a ResourceFlavor, a ClusterQueue of 1 CPU and
    a LocalQueue in the namespace."""

    def set_up(self):
        super().set_up()
        self.callback(delete_crds, install_crds(os.path.join(TOOLS, "kueue-crds")))
        self.start_kueue()
        suffix = uuid.uuid4().hex[:8]
        self.flavor, self.cq, self.lq = f"star-{suffix}", f"star-{suffix}", "team"
        apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": self.flavor}})
        self.callback(k8s.kubectl, "delete", "resourceflavor", self.flavor, "--ignore-not-found")
        apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": self.cq},
               "spec": {"namespaceSelector": {}, "resourceGroups": [{
                   "coveredResources": ["cpu"],
                   "flavors": [{"name": self.flavor, "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}})
        self.callback(k8s.kubectl, "delete", "clusterqueue", self.cq, "--ignore-not-found")
        apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
               "metadata": {"name": self.lq, "namespace": self.ns.name}, "spec": {"clusterQueue": self.cq}})
        # Before the namespace goes: Kueue's objects in it, while Kueue still runs.
        self.callback(k8s.kubectl, "delete", "workloads,localqueues", "--all", "-n", self.ns.name, "--timeout=60s")

    def start_kueue(self):
        certs = os.path.join(self.tmp, "certs")
        os.makedirs(certs)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", os.path.join(certs, "tls.key"), "-out", os.path.join(certs, "tls.crt")],
                       check=True, capture_output=True)
        health = free_port()
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": "kueue-system",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "metrics": {"bindAddress": f"127.0.0.1:{free_port()}"},
            "webhook": {"host": "127.0.0.1", "port": free_port(), "certDir": certs},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": ["pod"]},
        }
        path = os.path.join(self.tmp, "kueue.yaml")
        with open(path, "w") as f:
            json.dump(config, f)
        # Without internal certificate management Kueue reads its metrics certificate from
        # /etc/kueue/metrics/certs: given in a mount namespace of its own, over an overlay
        # of /etc, so that nothing is written to this machine's /etc.
        for d in ("etc-upper", "etc-work"):
            os.makedirs(os.path.join(self.tmp, d))
        script = ("mount -t overlay overlay -o lowerdir=/etc,upperdir=$1/etc-upper,workdir=$1/etc-work /etc"
                  " && mkdir -p /etc/kueue/metrics/certs && cp $1/certs/tls.crt $1/certs/tls.key /etc/kueue/metrics/certs/"
                  " && shift && exec \"$@\" 1>&2")
        d = Daemon(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", self.tmp,
                    os.path.join(TOOLS, "bin", "kueue"), "--config", path, "--kubeconfig", os.environ["KUBECONFIG"],
                    # The on-demand visibility API server wants certificates of its own; not used here.
                    "--feature-gates=VisibilityOnDemand=false"],
                   os.path.join(self.tmp, "kueue.log"))
        self.daemons["kueue"] = d
        self.callback(d.stop)

        def ready():
            if d.proc.poll() is not None:
                raise AssertionError("kueue exited:\n" + d.logs()[-4000:])
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=2).status == 200
            except OSError:
                return False
        self.wait(ready, 120, "Kueue's manager to be ready")


@unittest.skipUnless(OPERATOR, "STAR_OPERATOR_BINARY is needed")
class KueueTest(unittest.TestCase):
    def test_a_job_over_quota_waits_saying_so_and_runs_when_quota_frees(self):
        with KueueStack() as s:
            s.operator()
            ns = s.ns.name
            apply(job_manifest("first", ns, queue=s.lq))
            s.wait(lambda: s.admitted("first", WORKERS), 120, "the first job's pods to be admitted")
            s.wait(lambda: (s.condition("first", "Admitted") or {}).get("status") == "True", 60,
                   "the first job's Admitted condition")
            pod = s.pods("first")[0]
            self.assertEqual(pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"],
                             "first-" + s.job("first")["metadata"]["uid"][:8])
            self.assertEqual(pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"], str(WORKERS))

            apply(job_manifest("second", ns, queue=s.lq))

            def waiting_for_quota():
                c = s.condition("second", "Admitted")
                return c if c and c["status"] == "False" and c["reason"] == "WaitingForQuota" \
                    and "insufficient" in c["message"] else None
            c = s.wait(waiting_for_quota, 120, "the second job's Admitted False for quota")
            self.assertIn("cpu", c["message"])
            pods = s.pods("second")
            self.assertEqual(len(pods), WORKERS)
            for p in pods:
                self.assertIn({"name": "kueue.x-k8s.io/admission"}, p["spec"].get("schedulingGates", []))
                self.assertNotIn("nodeName", p["spec"])
                self.assertNotEqual(p["status"].get("phase"), "Running")

            k8s.kubectl_ok("delete", "tj", "first", "-n", ns, "--timeout=120s", timeout=150)
            s.wait(lambda: s.admitted("second", WORKERS), 180, "the second job admitted once quota freed")
            s.wait(lambda: (s.condition("second", "Admitted") or {}).get("status") == "True", 60,
                   "the second job's Admitted condition True")
            s.assert_never_forbidden()

    def test_a_job_naming_a_missing_queue_waits_saying_so(self):
        with KueueStack() as s:
            s.operator()
            apply(job_manifest("lost", s.ns.name, queue="no-such-queue"))

            def queue_missing():
                c = s.condition("lost", "Admitted")
                return c if c and c["status"] == "False" and c["reason"] == "QueueMissing" else None
            c = s.wait(queue_missing, 120, "Admitted False, QueueMissing")
            self.assertIn("no-such-queue", c["message"])
            self.assertTrue(all("nodeName" not in p["spec"] for p in s.pods("lost")))
            s.assert_never_forbidden()


@unittest.skipUnless(OPERATOR, "STAR_OPERATOR_BINARY is needed")
class VolcanoTest(unittest.TestCase):
    def test_podgroup_made_with_the_job_and_gone_with_it(self):
        with Stack() as s:
            s.callback(delete_crds, install_crds(os.path.join(TOOLS, "volcano-crds")))
            s.operator()
            ns = s.ns.name
            apply(job_manifest("gang", ns, scheduler="volcano", ps=1))
            pg = s.wait(lambda: k8s.get_json("podgroup.scheduling.volcano.sh", "gang", "-n", ns), 60,
                        "the job's PodGroup")
            self.assertEqual(pg["spec"]["minMember"], WORKERS + 1)
            uid = s.job("gang")["metadata"]["uid"]
            self.assertEqual([(o["kind"], o["uid"], o.get("controller")) for o in pg["metadata"]["ownerReferences"]],
                             [("TrainingJob", uid, True)])
            pods = s.wait(lambda: len(s.pods("gang")) == WORKERS + 1 and s.pods("gang"), 60, "the job's pods")
            for p in pods:
                self.assertEqual(p["spec"]["schedulerName"], "volcano")
                self.assertEqual(p["metadata"]["annotations"]["scheduling.k8s.io/group-name"], "gang")
            self.assertEqual(s.condition("gang", "PodGroupReady")["status"], "True")
            k8s.kubectl_ok("delete", "tj", "gang", "-n", ns, "--timeout=120s", timeout=150)
            # The garbage collector removes it (it learns of a new resource within 30 s).
            s.wait(lambda: k8s.kubectl("get", "podgroup.scheduling.volcano.sh", "gang", "-n", ns).returncode != 0,
                   120, "the PodGroup to go with its job")
            s.assert_never_forbidden()

    def test_without_the_podgroup_crd_the_job_waits_with_a_condition(self):
        with Stack() as s:
            s.operator()
            apply(job_manifest("nogroup", s.ns.name, scheduler="volcano"))

            def unsupported():
                c = s.condition("nogroup", "PodGroupReady")
                return c if c and c["status"] == "False" else None
            c = s.wait(unsupported, 60, "PodGroupReady False")
            self.assertEqual(c["reason"], "PodGroupUnsupported")
            self.assertIn("scheduling.volcano.sh", c["message"])
            self.assertEqual(s.pods("nogroup"), [])
            self.assertNotEqual(s.job("nogroup").get("status", {}).get("phase"), "Failed")
            self.assertIsNone(s.daemons["operator"].proc.poll(), "the operator runs on")
            s.assert_never_forbidden()


if __name__ == "__main__":
    unittest.main()
