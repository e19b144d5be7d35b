#!/usr/bin/python3
"""The chart installed, upgraded and uninstalled by the real helm on the real API server.

Runs on the k8s_cluster fixture's cluster (tests/k8s), which already holds the CRDs of
crds/: `helm install` skips them. Each test works in namespaces of its own under a
release name of its own, and removes the cluster-scoped objects of its release (by the
release's label) even when it fails. The CRDs are never deleted: other tests use them.

Every install keeps the chart's pods off the test node (a nodeSelector no node matches,
the only value the "default values" install sets): star-node runs a container's command
on the host, and the chart's containers name star-operator and star-agent, which would
either fail at once (a Deployment then replaces its pods without end) or, where a build
is installed on the host, run a second operator against every test's jobs.

The prometheus-operator CRDs (ServiceMonitor, PodMonitor, PrometheusRule) are not part
of the fixture: with serviceMonitor or prometheusRule enabled and them absent, helm
refuses the install. The monitoring test creates the stand-ins of testdata/crds when no
such CRDs exist yet and leaves them in place (a concurrent test may be using them; the
cluster's teardown removes them).

Environment (tests/k8s/CMakeLists.txt): KUBECONFIG, STAR_KUBECTL, STAR_HELM,
STAR_SOURCE_DIR.
"""
import json
import os
import sys
import tempfile
import unittest
import uuid

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "k8s"))

from helmcli import CHART, helm_available, helm_cluster, helm_template  # noqa: E402
from k8s import Namespace, eventually, get_json, kubectl, kubectl_ok  # noqa: E402

INSTANCE = "app.kubernetes.io/instance"
STAR_CRDS = ("trainingjobs.star.dev", "nodeallocations.star.dev")
MONITORING_CRDS = os.path.join(HERE, "testdata", "crds")

_tmp = tempfile.TemporaryDirectory(prefix="star-helm-install-")
# Keeps the operator's and the agent's pods Pending (see the module's comment). No agent
# runs, so no node has anything to restore: the uninstall hook (whose Job would stay
# Pending too) is off here; tests/helm/agent_hook_test.py tests what it renders.
OFF_NODE = os.path.join(_tmp.name, "off-node.yaml")
with open(OFF_NODE, "w") as f:
    yaml.safe_dump({"operator": {"nodeSelector": {"star.dev/helm-install-test": "no-such-node"}},
                    "agent": {"nodeSelector": {"star.dev/helm-install-test": "no-such-node"},
                              "restoreOnUninstall": False}}, f)


def release_name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def docs_of(manifest):
    return [d for d in yaml.safe_load_all(manifest) if d]


def key(obj):
    """(Kind.group, namespace or None, name): how an object is named in the cluster."""
    group = obj["apiVersion"].rpartition("/")[0]
    kind = obj["kind"] + ("." + group if group else "")
    return kind, obj["metadata"].get("namespace"), obj["metadata"]["name"]


def manifest_file(manifest):
    path = os.path.join(_tmp.name, uuid.uuid4().hex + ".yaml")
    with open(path, "w") as f:
        f.write(manifest)
    return path


def listable_resources():
    """Every resource type the API server lists (built-in and CRDs), comma-joined."""
    out = kubectl_ok("api-resources", "--verbs=list", "-o", "name")
    return ",".join(r for r in out.split() if r not in ("events", "events.events.k8s.io"))


def labelled(release):
    """Every object of any listable kind, in any namespace, that carries the release's
    instance label, as kind/name lines (namespaced: NAMESPACE kind/name)."""
    def attempt():
        # A CRD another test removes between the two calls fails the get: list again.
        p = kubectl("get", listable_resources(), "-A", "-l", f"{INSTANCE}={release}",
                    "-o", "custom-columns=NS:.metadata.namespace,KIND:.kind,NAME:.metadata.name",
                    "--no-headers", timeout=180)
        return p if p.returncode == 0 else None
    p = eventually(attempt, timeout=60, interval=1, what="listing every kind")
    return sorted(" ".join(line.split()) for line in p.stdout.splitlines() if line.strip())


class Release:
    """One helm release in namespace NS; uninstall() at the end, and cleanup() removes
    what a failed test left: the release and its cluster-scoped objects."""

    def __init__(self, name, namespace):
        self.name, self.namespace = name, namespace

    def helm(self, command, *args, timeout=300):
        """`helm COMMAND RELEASE ARGS --namespace NS`, COMMAND e.g. "install" or "get manifest"."""
        return helm_cluster(*command.split(), self.name, *args, "--namespace", self.namespace, timeout=timeout)

    def manifest(self):
        rc, out, err = self.helm("get manifest")
        if rc != 0:
            raise AssertionError(f"helm get manifest {self.name} exited {rc}: {err}")
        return out

    def status(self):
        rc, out, err = self.helm("status", "-o", "json")
        if rc != 0:
            raise AssertionError(f"helm status {self.name} exited {rc}: {err}")
        return json.loads(out)

    def history(self):
        rc, out, err = self.helm("history", "-o", "json")
        if rc != 0:
            raise AssertionError(f"helm history {self.name} exited {rc}: {err}")
        return [(int(r["revision"]), r["status"]) for r in json.loads(out)]

    def release_secrets(self):
        out = kubectl_ok("get", "secrets", "-n", self.namespace, "-l", f"owner=helm,name={self.name}",
                         "-o", "name")
        return out.split()

    def cleanup(self):
        helm_cluster("uninstall", self.name, "--namespace", self.namespace, "--ignore-not-found")
        for kind in ("clusterroles", "clusterrolebindings"):
            kubectl("delete", kind, "-l", f"{INSTANCE}={self.name}", "--ignore-not-found")


@unittest.skipUnless(helm_available() and os.environ.get("KUBECONFIG"),
                     "STAR_HELM and KUBECONFIG (the k8s_cluster fixture) are needed")
class InstallTest(unittest.TestCase):
    def release(self, prefix, namespace):
        r = Release(release_name(prefix), namespace)
        self.addCleanup(r.cleanup)
        return r

    def install(self, r, *values, verb="install"):
        rc, out, err = r.helm(verb, CHART, "--values", OFF_NODE, *values)
        self.assertEqual(rc, 0, f"helm {verb} {r.name} {' '.join(values)}: {err}")
        return out

    def assert_in_cluster(self, r, values):
        """Every object of the release's manifest exists in the cluster, with helm's
        ownership marks and the release's labels; `helm template` with the same values
        renders the same objects; nothing else of the manifest's kinds carries the
        release's label. Returns the cluster's objects by key()."""
        manifest = r.manifest()
        rendered = docs_of(manifest)
        self.assertTrue(rendered, "the release has objects")
        rc, out, err = helm_template(["--values", OFF_NODE, *values], release=r.name, namespace=r.namespace)
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(map(key, docs_of(out))), sorted(map(key, rendered)),
                         "helm template renders what helm install installed")
        self.assertNotIn("CustomResourceDefinition", [d["kind"] for d in rendered],
                         "the CRDs are not objects of the release (helm skips and never deletes them)")
        p = kubectl("get", "-f", manifest_file(manifest), "-o", "json")
        self.assertEqual(p.returncode, 0, f"objects of {r.name} missing from the cluster: {p.stderr}")
        got = json.loads(p.stdout)
        items = got["items"] if got["kind"] == "List" else [got]
        cluster = {key(o): o for o in items}
        self.assertEqual(sorted(cluster), sorted(map(key, rendered)),
                         "the cluster holds each object of the manifest, in the namespace it names")
        for k, o in cluster.items():
            labels, notes = o["metadata"].get("labels", {}), o["metadata"].get("annotations", {})
            self.assertEqual(labels.get(INSTANCE), r.name, k)
            self.assertEqual(labels.get("app.kubernetes.io/managed-by"), "Helm", k)
            self.assertEqual(notes.get("meta.helm.sh/release-name"), r.name, k)
            self.assertEqual(notes.get("meta.helm.sh/release-namespace"), r.namespace, k)
        kinds = sorted({k[0] for k in cluster})
        out = kubectl_ok("get", ",".join(kinds), "-A", "-l", f"{INSTANCE}={r.name}", "-o", "json")
        by_label = sorted(key(o) for o in json.loads(out)["items"])
        self.assertEqual(by_label, sorted(cluster), "no object of these kinds carries the label but the release's")
        return cluster

    def assert_uninstalled(self, r, manifests):
        """`helm uninstall` removed every object of every revision (by name), everything
        the release's label marks in any kind (its pods, ReplicaSets and EndpointSlices
        once the garbage collector is done), and the release's own records; the CRDs
        stay."""
        # What the label finds before: the release's objects and what their controllers made.
        current = docs_of(manifests[-1])
        want = {f"{d['metadata'].get('namespace', '<none>')} {d['kind']} {d['metadata']['name']}" for d in current}
        if any(d["kind"] == "Deployment" for d in current):
            want.add("Pod")
        before = []

        def found():
            before[:] = labelled(r.name)
            kinds = {line.split()[1] for line in before}
            return want - {"Pod"} <= set(before) and ("Pod" not in want or "Pod" in kinds)
        try:
            eventually(found, timeout=60, interval=1, what=f"the objects of {r.name} by its label")
        except AssertionError:
            self.fail(f"by label {INSTANCE}={r.name}: want {sorted(want)}, found {before}")

        rc, out, err = r.helm("uninstall", "--wait", "--timeout", "120s", timeout=180)
        self.assertEqual(rc, 0, err)
        for m in manifests:
            p = kubectl("get", "-f", manifest_file(m), "--ignore-not-found", "-o", "name")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout.split(), [], "objects of the release left after helm uninstall")
        left = []

        def collected():
            left[:] = labelled(r.name)
            return not left
        try:
            eventually(collected, timeout=90, interval=2, what=f"the dependents of {r.name} to be collected")
        except AssertionError:
            self.fail(f"left behind by helm uninstall {r.name}: {left}")
        self.assertEqual(r.release_secrets(), [], "helm's release records are gone")
        rc, out, _ = helm_cluster("list", "-a", "-q", "--namespace", r.namespace)
        self.assertNotIn(r.name, out.split())
        for crd in STAR_CRDS:
            self.assertIsNotNone(get_json("crd", crd), f"{crd} stays after helm uninstall")

    def test_default_values_install_upgrade_and_uninstall(self):
        with Namespace("helm") as ns:
            r = self.release("def", ns.name)
            notes = self.install(r)
            self.assertIn("never upgraded or deleted by helm", notes, "NOTES say the CRDs stay")
            self.assertEqual(r.history(), [(1, "deployed")])
            first = self.assert_in_cluster(r, [])
            operator, agent = f"{r.name}-star-operator", f"{r.name}-star-agent"
            expected = {("Deployment.apps", ns.name, operator), ("DaemonSet.apps", ns.name, agent),
                        ("ServiceAccount", ns.name, operator), ("ServiceAccount", ns.name, agent),
                        ("Service", ns.name, operator), ("Service", ns.name, agent),
                        ("ClusterRole.rbac.authorization.k8s.io", None, operator),
                        ("ClusterRole.rbac.authorization.k8s.io", None, agent),
                        ("ClusterRoleBinding.rbac.authorization.k8s.io", None, operator),
                        ("ClusterRoleBinding.rbac.authorization.k8s.io", None, agent),
                        # The report endpoint's own certificate (reportTLS on by default).
                        ("Role.rbac.authorization.k8s.io", ns.name, operator + "-report-tls"),
                        ("RoleBinding.rbac.authorization.k8s.io", ns.name, operator + "-report-tls"),
                        ("NetworkPolicy.networking.k8s.io", ns.name, operator)}
            self.assertEqual(set(first), expected)
            dep = first[("Deployment.apps", ns.name, operator)]
            self.assertEqual(dep["spec"]["replicas"], 1)
            self.assertEqual(dep["spec"]["strategy"]["type"], "Recreate")
            self.assertNotIn("--leader-elect", dep["spec"]["template"]["spec"]["containers"][0]["args"])
            for crd in STAR_CRDS:
                self.assertIsNotNone(get_json("crd", crd))
            pods = eventually(lambda: get_json("pods", "-n", ns.name, "-l", f"{INSTANCE}={r.name}")["items"],
                              what="the operator's pod")
            for pod in pods:
                self.assertEqual(pod["status"]["phase"], "Pending", "kept off the test node")
                self.assertNotIn("nodeName", pod["spec"])
            manifests = [r.manifest()]

            # A value the schema refuses: the upgrade fails and revision 1 stays as it was.
            rc, _, err = r.helm("upgrade", CHART, "--values", OFF_NODE, "--set", "operator.replicas=two")
            self.assertNotEqual(rc, 0)
            self.assertIn("at '/operator/replicas'", err)
            self.assertEqual(r.history(), [(1, "deployed")])
            self.assertEqual(get_json("deployment", operator, "-n", ns.name)["metadata"]["generation"],
                             dep["metadata"]["generation"])

            # Changed values: two replicas (leader election), other resources, no agent.
            changed = ["--set", "operator.replicas=2", "--set", "operator.resources.requests.cpu=250m",
                       "--set", "operator.resources.limits.memory=1Gi", "--set", "agent.enabled=false"]
            self.install(r, *changed, verb="upgrade")
            self.assertEqual(r.history(), [(1, "superseded"), (2, "deployed")])
            self.assertEqual(r.status()["version"], 2)
            second = self.assert_in_cluster(r, changed)
            dep2 = second[("Deployment.apps", ns.name, operator)]
            self.assertEqual(dep2["spec"]["replicas"], 2)
            self.assertGreater(dep2["metadata"]["generation"], dep["metadata"]["generation"])
            self.assertEqual(dep2["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], "100%")
            c = dep2["spec"]["template"]["spec"]["containers"][0]
            self.assertIn("--leader-elect", c["args"])
            self.assertEqual(c["resources"], {"requests": {"cpu": "250m", "memory": "128Mi"},
                                              "limits": {"memory": "1Gi"}})
            lease_role = ("Role.rbac.authorization.k8s.io", ns.name, f"{operator}-leader-election")
            self.assertIn(lease_role, second, "the upgrade created the Lease's Role")
            gone = set(first) - set(second)
            self.assertIn("DaemonSet.apps", {k[0] for k in gone}, gone)
            self.assertTrue(all(k[2] == agent for k in gone), gone)
            for kind, namespace, name in gone:
                self.assertIsNone(get_json(kind, name, *(["-n", namespace] if namespace else [])),
                                  f"{kind} {name} of revision 1 is deleted by the upgrade")
            manifests.append(r.manifest())

            # The same values again: a new revision that changes no object.
            def versions(objs):
                return {k: o["metadata"].get("generation", o["metadata"]["resourceVersion"])
                        for k, o in objs.items()}
            self.install(r, *changed, verb="upgrade")
            self.assertEqual(r.history()[-1], (3, "deployed"))
            self.assertEqual(versions(self.assert_in_cluster(r, changed)), versions(second))

            self.assert_uninstalled(r, manifests)

    def test_non_default_values_watched_namespace_and_monitoring(self):
        ensure_monitoring_crds()
        with Namespace("helm") as ns, Namespace("helm-team") as team:
            r = self.release("mon", ns.name)
            values = ["--set", "operator.replicas=2", "--set", f"operator.watchNamespace={team.name}",
                      "--set", "agent.enabled=false", "--set", "serviceMonitor.enabled=true",
                      "--set", "prometheusRule.enabled=true", "--set", "dashboards.enabled=true"]
            self.install(r, *values)
            objs = self.assert_in_cluster(r, values)
            operator = f"{r.name}-star-operator"
            kinds = {k[0] for k in objs}
            self.assertNotIn("DaemonSet.apps", kinds)
            for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
                self.assertIn(kind + ".monitoring.coreos.com", kinds)
            pm = next(o for k, o in objs.items() if k[0] == "PodMonitor.monitoring.coreos.com")
            self.assertEqual(pm["spec"]["namespaceSelector"], {"matchNames": [team.name]})
            dep = objs[("Deployment.apps", ns.name, operator)]
            self.assertEqual(dep["spec"]["replicas"], 2)
            self.assertIn(f"--namespace={team.name}", dep["spec"]["template"]["spec"]["containers"][0]["args"])
            # The operator's namespaced rules and its Lease live in the watched namespace.
            roles = sorted(k[2] for k in objs if k[0] == "Role.rbac.authorization.k8s.io" and k[1] == team.name)
            self.assertEqual(roles, [operator, f"{operator}-leader-election"])
            bindings = sorted(k[2] for k in objs
                              if k[0] == "RoleBinding.rbac.authorization.k8s.io" and k[1] == team.name)
            self.assertEqual(bindings, roles)
            cr = objs[("ClusterRole.rbac.authorization.k8s.io", None, operator)]
            self.assertNotIn("pods", [res for rule in cr["rules"] for res in rule["resources"]],
                             "no cluster-wide pod rights with a watched namespace")
            dashboards = [o for k, o in objs.items() if k[0] == "ConfigMap"]
            self.assertTrue(dashboards)
            for cm in dashboards:
                self.assertEqual(cm["metadata"]["labels"].get("grafana_dashboard"), "1")
                self.assertEqual(cm["metadata"]["annotations"].get("grafana_folder"), "STAR")
            self.assert_uninstalled(r, [r.manifest()])

    def test_schema_refusal_at_install_creates_nothing(self):
        cases = [("operator.replicas=two", "at '/operator/replicas'", "want integer"),
                 ("agent.cgroupDriver=docker", "at '/agent/cgroupDriver'", "value must be one of")]
        with Namespace("helm") as ns:
            for setting, where, what in cases:
                with self.subTest(setting):
                    r = self.release("bad", ns.name)
                    rc, out, err = r.helm("install", CHART, "--values", OFF_NODE, "--set", setting)
                    self.assertNotEqual(rc, 0, out)
                    self.assertIn(where, err)
                    self.assertIn(what, err)
                    self.assertIn("values don't meet the specifications of the schema", err)
                    self.assertEqual(r.release_secrets(), [], "no release record")
                    self.assertEqual(labelled(r.name), [], "no object of the release")
        # Into a namespace that does not exist: helm refuses before creating it.
        r = self.release("bad", release_name("helm-none"))
        rc, _, err = r.helm("install", CHART, "--create-namespace", "--set", "operator.replicas=two")
        self.assertNotEqual(rc, 0)
        self.assertIn("at '/operator/replicas'", err)
        self.assertIsNone(get_json("namespace", r.namespace), "--create-namespace created nothing")
        self.assertEqual(labelled(r.name), [])


def ensure_monitoring_crds():
    """The prometheus-operator CRDs the chart's monitoring objects need: created from
    testdata/crds where absent (never replaced or deleted), then waited for."""
    names = []
    for f in sorted(os.listdir(MONITORING_CRDS)):
        path = os.path.join(MONITORING_CRDS, f)
        with open(path) as fh:
            name = yaml.safe_load(fh)["metadata"]["name"]
        names.append("crd/" + name)
        if get_json("crd", name) is None:
            p = kubectl("create", "-f", path)
            if p.returncode != 0 and "AlreadyExists" not in p.stderr:
                raise AssertionError(f"creating {name}: {p.stderr}")
    kubectl_ok("wait", "--for", "condition=established", "--timeout=60s", *names, timeout=90)


if __name__ == "__main__":
    unittest.main()
