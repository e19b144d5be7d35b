#!/usr/bin/python3
"""The rendered chart applied with the real kubectl to the API emulator.

No Kubernetes API server runs here: `helm template` renders the chart and
star-test-apiserver stands in for the API server (with the prometheus-operator CRDs of
testdata/crds). Every object of the chart, CRDs included, must be accepted by server-side
apply's admission and be readable back.

Environment: STAR_HELM, STAR_SOURCE_DIR, STAR_APISERVER_BINARY, STAR_KUBECTL.
"""
import json
import os
import subprocess
import tempfile
import unittest

import yaml

from helmcli import helm_available, helm_template

APISERVER = os.environ.get("STAR_APISERVER_BINARY", "")
KUBECTL = os.environ.get("STAR_KUBECTL", "kubectl")
HERE = os.path.dirname(os.path.abspath(__file__))


class Emulator:
    """star-test-apiserver on a free loopback port, stopped (SIGTERM) on exit."""

    def __init__(self, workdir):
        self.kubeconfig = os.path.join(workdir, "kubeconfig")
        self.log = open(os.path.join(workdir, "apiserver.log"), "w")
        self.proc = subprocess.Popen(
            [APISERVER, "--listen", "127.0.0.1:0", "--crds", os.path.join(HERE, "testdata", "crds"),
             "--kubeconfig-out", self.kubeconfig],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()  # "listening on ..." once it serves, "" if it died
        if not line.startswith("listening on "):
            self.stop()
            raise AssertionError("the emulator did not start: " + open(self.log.name).read())
        self.cache = os.path.join(workdir, "kubectl-cache")

    def kubectl(self, *args, stdin=None):
        return subprocess.run([KUBECTL, "--kubeconfig", self.kubeconfig, "--cache-dir", self.cache, *args],
                              input=stdin, capture_output=True, text=True, timeout=120)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.log.close()


def render(*args):
    """The chart as release star in namespace star-system."""
    rc, out, err = helm_template(args, release="star", namespace="star-system")
    if rc != 0:
        raise AssertionError(f"helm template exited {rc}: {err}")
    return out


@unittest.skipUnless(helm_available() and APISERVER, "STAR_HELM and STAR_APISERVER_BINARY are needed")
class ApplyTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="star-helm-apply-")
        self.emulator = Emulator(self.dir.name)

    def tearDown(self):
        self.emulator.stop()
        self.dir.cleanup()

    def apply(self, manifests):
        r = self.emulator.kubectl("apply", "--server-side", "--field-manager", "helm", "-f", "-", stdin=manifests)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def get(self, *args):
        r = self.emulator.kubectl("get", *args, "-o", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def names(self, resource, namespace=None):
        args = [resource] + (["-n", namespace] if namespace else [])
        return sorted(i["metadata"]["name"] for i in self.get(*args)["items"])

    def test_every_object_of_the_chart_with_monitoring_on_is_applied(self):
        self.assertEqual(self.emulator.kubectl("create", "namespace", "star-system").returncode, 0)
        manifests = render("--include-crds", "--set", "serviceMonitor.enabled=true",
                           "--set", "prometheusRule.enabled=true", "--set", "dashboards.enabled=true")
        docs = [d for d in yaml.safe_load_all(manifests) if d]
        out = self.apply(manifests)
        self.assertEqual(out.count("serverside-applied"), len(docs), out)
        for d in docs:
            kind, name = d["kind"].lower(), d["metadata"]["name"]
            ns = d["metadata"].get("namespace")
            got = self.get(kind, name, *(["-n", ns] if ns else []))
            self.assertEqual(got["metadata"]["name"], name)
            self.assertEqual(got["metadata"].get("labels", {}).get("app.kubernetes.io/instance"),
                             d["metadata"].get("labels", {}).get("app.kubernetes.io/instance"), name)
        self.assertEqual(self.names("deployments", "star-system"), ["star-operator"])
        self.assertEqual(self.names("daemonsets", "star-system"), ["star-agent"])
        self.assertIn("trainingjobs.star.dev", self.names("crd"))
        self.assertTrue(self.names("servicemonitors", "star-system"))
        self.assertTrue(self.names("prometheusrules", "star-system"))

    def test_a_second_apply_changes_nothing_and_a_watched_namespace_gets_roles(self):
        for ns in ("star-system", "team-a"):
            self.assertEqual(self.emulator.kubectl("create", "namespace", ns).returncode, 0)
        manifests = render("--include-crds", "--set", "operator.watchNamespace=team-a",
                           "--set", "operator.replicas=2")
        self.apply(manifests)
        before = self.get("deployment", "star-operator", "-n", "star-system")["metadata"]["resourceVersion"]
        self.apply(manifests)
        after = self.get("deployment", "star-operator", "-n", "star-system")["metadata"]["resourceVersion"]
        self.assertEqual(before, after, "applying the same chart again is a no-op")
        self.assertTrue(self.names("roles", "team-a"))
        self.assertTrue(self.names("rolebindings", "team-a"))


if __name__ == "__main__":
    unittest.main()
