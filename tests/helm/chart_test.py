#!/usr/bin/python3
"""Tests of the star chart (helm/star), rendered and linted by the real helm.

Environment: STAR_HELM (the helm binary), STAR_SOURCE_DIR (the repository),
STAR_HELM_NPM_DIR (where `npm ci` installs kubernetes-models, for KubernetesModelsTest).
Run one class: chart_test.py -v RenderMatrixTest.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

from helmcli import CHART, SOURCE, helm_available, helm_lint, helm_template

HERE = os.path.dirname(os.path.abspath(__file__))


def project_version():
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        m = re.search(r"project\(star VERSION ([0-9.]+)", f.read())
    return m.group(1)


def run_render(*args, release="release-name", namespace="default"):
    """`helm template`; returns (exit status, stdout, stderr)."""
    return helm_template(args, release=release, namespace=namespace)


def render(*args, release="release-name", namespace="default", hooks=False):
    """Renders; returns the documents (dicts) in order, helm hooks only with `hooks` (they
    are not part of the release: agent_hook_test.py checks them). Fails the test on a
    non-zero exit."""
    rc, out, err = run_render(*args, release=release, namespace=namespace)
    if rc != 0:
        raise AssertionError(f"helm template {' '.join(args)} exited {rc}: {err}")
    docs = [d for d in yaml.safe_load_all(out) if d is not None]
    return [d for d in docs if hooks or "helm.sh/hook" not in d["metadata"].get("annotations", {})]


def find(docs, kind, name=None):
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs, kind, name=None):
    found = find(docs, kind, name)
    if len(found) != 1:
        raise AssertionError(f"want one {kind} {name or ''}, got {len(found)}")
    return found[0]


def container(workload):
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, containers
    return containers[0]


# The render matrix: each case's helm flags (KubernetesModelsTest validates them all,
# LintTest lints them all). The release is release-name in namespace default but where
# RELEASES names another.
MATRIX = {
    "defaults": [],
    "agent-off": ["--set", "agent.enabled=false"],
    "monitoring": ["--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true,dashboards.enabled=true",
                   "--set", "serviceMonitor.labels.release=prom"],
    "private-registry": ["--set", "image.registry=registry.example.com/star,image.tag=1.2.3",
                         "--set", "imagePullSecrets[0].name=regcred", "--set", "image.pullPolicy=Always"],
    "watch-namespace": ["--set", "operator.watchNamespace=team-a"],
    "replicas-2": ["--set", "operator.replicas=2"],
    "replicas-2-watch-namespace": ["--set", "operator.replicas=2,operator.watchNamespace=team-a"],
    "report-tls": ["--set", "operator.reportTLS.enabled=true,operator.reportTLS.secretName=star-report-tls"],
    "report-plain": ["--set", "operator.reportTLS.enabled=false,networkPolicy.enabled=false"],
    "agent-values": ["--set", "agent.cgroupDriver=cgroupfs,agent.cgroupRoot=k8s,agent.maxUnavailable=2",
                     "--set", "agent.extraCapabilities={SYS_ADMIN}"],
    "named-release": [],
}
RELEASES = {"named-release": ("star", "star-system")}


def render_case(case, *extra, hooks=False):
    """Renders MATRIX[case] (with extra flags after it) as its release."""
    release, namespace = RELEASES.get(case, ("release-name", "default"))
    return render(*MATRIX[case], *extra, release=release, namespace=namespace, hooks=hooks)


class RenderMatrixTest(unittest.TestCase):
    def test_output_is_framed_like_helm_template(self):
        rc, out, _ = run_render()
        self.assertEqual(rc, 0)
        self.assertTrue(out.startswith("---\n# Source: star/templates/"), out[:80])
        sources = re.findall(r"^# Source: (\S+)$", out, re.M)
        self.assertEqual(len(sources), out.count("---\n# Source: "))
        for s in sources:
            self.assertTrue(os.path.isfile(os.path.join(CHART, s[len("star/"):])), s)
        # helm's install order: ServiceAccounts before RBAC before Services before workloads.
        kinds = [d["kind"] for d in render()]
        order = ["NetworkPolicy", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                 "Service", "DaemonSet", "Deployment"]
        self.assertEqual([k for k in order if k in kinds], order)
        self.assertEqual(kinds, sorted(kinds, key=order.index))

    def test_defaults(self):
        docs = render()
        self.assertEqual(sorted(d["kind"] for d in docs),
                         sorted(["ServiceAccount", "ServiceAccount", "ClusterRole", "ClusterRole",
                                 "ClusterRoleBinding", "ClusterRoleBinding", "Service", "Service",
                                 "DaemonSet", "Deployment", "NetworkPolicy", "Role", "RoleBinding"]))
        version = project_version()
        for d in docs:
            labels = d["metadata"]["labels"]
            self.assertEqual(labels["app.kubernetes.io/name"], "star")
            self.assertEqual(labels["app.kubernetes.io/instance"], "release-name")
            self.assertEqual(labels["app.kubernetes.io/version"], version)
            self.assertEqual(labels["app.kubernetes.io/managed-by"], "Helm")
            self.assertIn(labels["app.kubernetes.io/component"], ("operator", "agent"))
        dep = one(docs, "Deployment", "release-name-star-operator")
        self.assertEqual(dep["spec"]["replicas"], 1)
        self.assertEqual(dep["spec"]["strategy"], {"type": "Recreate"})
        c = container(dep)
        self.assertEqual(c["image"], f"ghcr.io/star-dev/star-operator:{version}")  # scripts/images.sh
        self.assertEqual(c["imagePullPolicy"], "IfNotPresent")
        self.assertNotIn("--leader-elect", c["args"])
        self.assertFalse([a for a in c["args"] if a.startswith("--namespace")])
        self.assertIn("--report-url=https://release-name-star-operator.default.svc:8443", c["args"])
        self.assertIn("--metrics-listen=0.0.0.0:8080", c["args"])
        self.assertIn("--report-listen=0.0.0.0:8443", c["args"])
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports, {"report": 8443, "metrics": 8080})
        self.assertEqual(c["livenessProbe"]["httpGet"], {"path": "/healthz", "port": "metrics"})
        self.assertEqual(c["readinessProbe"]["httpGet"], {"path": "/readyz", "port": "metrics"})
        self.assertEqual(c["resources"]["requests"], {"cpu": "100m", "memory": "128Mi"})
        sc = c["securityContext"]
        self.assertIs(sc["runAsNonRoot"], True)
        self.assertIs(sc["readOnlyRootFilesystem"], True)
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertEqual(sc["capabilities"], {"drop": ["ALL"]})
        self.assertEqual(sc["seccompProfile"], {"type": "RuntimeDefault"})
        pod = dep["spec"]["template"]["spec"]
        self.assertEqual(pod["serviceAccountName"], "release-name-star-operator")
        self.assertNotIn("imagePullSecrets", pod)
        self.assertIs(pod["securityContext"]["runAsNonRoot"], True)
        # The Service reaches the pods: its selector is the pods' labels' subset.
        svc = one(docs, "Service", "release-name-star-operator")
        pod_labels = dep["spec"]["template"]["metadata"]["labels"]
        self.assertLessEqual(svc["spec"]["selector"].items(), pod_labels.items())
        self.assertEqual(dep["spec"]["selector"]["matchLabels"], svc["spec"]["selector"])
        self.assertEqual({p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]},
                         {"report": (8443, "report"), "metrics": (8080, "metrics")})
        self.check_agent(one(docs, "DaemonSet", "release-name-star-agent"), version)

    def check_agent(self, ds, version):
        spec = ds["spec"]
        self.assertEqual(spec["updateStrategy"], {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}})
        pod = spec["template"]["spec"]
        self.assertEqual(pod["priorityClassName"], "system-node-critical")
        self.assertIs(pod["hostNetwork"], True)
        self.assertEqual(pod["dnsPolicy"], "ClusterFirstWithHostNet")
        self.assertEqual(pod["serviceAccountName"], "release-name-star-agent")
        c = container(ds)
        self.assertEqual(c["image"], f"ghcr.io/star-dev/star-agent:{version}")  # scripts/images.sh
        for arg in ("--node=$(NODE_NAME)", "--in-cluster", "--driver=systemd",
                    "--journal=/var/lib/star-agent/journal.json", "--metrics-address=$(HOST_IP):9401"):
            self.assertIn(arg, c["args"])
        env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
        self.assertEqual(env, {"NODE_NAME": "spec.nodeName", "HOST_IP": "status.hostIP",
                               "STAR_AGENT_MODE": "metadata.annotations['star.dev/agent-mode']"})
        sc = c["securityContext"]
        self.assertIs(sc.get("privileged"), False)
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertIs(sc["readOnlyRootFilesystem"], True)
        self.assertEqual(sc["capabilities"], {"drop": ["ALL"], "add": ["NET_ADMIN", "SYS_ADMIN", "SYS_PTRACE"]})
        self.assertIs(pod["hostPID"], True, "pods' interfaces are found from their processes")
        self.assertEqual(sc["seccompProfile"], {"type": "RuntimeDefault"})
        self.assertEqual(c["livenessProbe"]["httpGet"], {"path": "/healthz", "port": "metrics"})
        self.assertEqual(c["readinessProbe"]["httpGet"], {"path": "/readyz", "port": "metrics"})
        self.assertEqual([p["containerPort"] for p in c["ports"] if p["name"] == "metrics"], [9401])
        volumes = {v["name"]: v["hostPath"] for v in pod["volumes"]}
        self.assertEqual(volumes["cgroup"], {"path": "/sys/fs/cgroup", "type": "Directory"})
        self.assertEqual(volumes["journal"], {"path": "/var/lib/star-agent", "type": "DirectoryOrCreate"})
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        self.assertEqual(mounts, {"cgroup": "/sys/fs/cgroup", "journal": "/var/lib/star-agent"})
        self.assertEqual(pod["tolerations"], [{"operator": "Exists"}])

    def test_agent_off(self):
        docs = render(*MATRIX["agent-off"])
        self.assertEqual(find(docs, "DaemonSet"), [])
        for d in docs:
            self.assertEqual(d["metadata"]["labels"]["app.kubernetes.io/component"], "operator", d["kind"])
        one(docs, "Deployment")
        self.assertEqual([d["metadata"]["name"] for d in find(docs, "ClusterRole")], ["release-name-star-operator"])

    def test_agent_values(self):
        docs = render_case("agent-values")
        ds = one(docs, "DaemonSet")
        c = container(ds)
        self.assertIn("--driver=cgroupfs", c["args"])
        self.assertIn("--cgroup-root=k8s", c["args"])
        self.assertEqual(c["securityContext"]["capabilities"]["add"], ["NET_ADMIN", "SYS_ADMIN", "SYS_PTRACE"],
                         "an extra capability already added is listed once")
        docs = render("--set", "agent.findPodInterfaces=false")
        pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
        self.assertEqual(container(one(docs, "DaemonSet"))["securityContext"]["capabilities"]["add"], ["NET_ADMIN"])
        self.assertNotIn("hostPID", pod)
        self.assertEqual(ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"], 2)

    def test_agent_headroom(self):
        args = container(one(render(), "DaemonSet"))["args"]
        self.assertIn("--nic=auto", args)
        self.assertIn("--headroom-interval-ms=5000", args)
        self.assertFalse([a for a in args if a.startswith("--nic-capacity")], "its link speed by default")
        args = container(one(render("--set", "agent.headroom.nic=ens5", "--set", "agent.headroom.nicCapacity=25G",
                                    "--set", "agent.headroom.intervalMs=0"), "DaemonSet"))["args"]
        self.assertEqual([a for a in args if "nic" in a or "headroom" in a],
                         ["--nic=ens5", "--nic-capacity=25G", "--headroom-interval-ms=0"])

    def test_monitoring(self):
        docs = render(*MATRIX["monitoring"])
        sm = one(docs, "ServiceMonitor")
        self.assertEqual(sm["apiVersion"], "monitoring.coreos.com/v1")
        self.assertEqual(sm["metadata"]["labels"]["release"], "prom")
        self.assertEqual(sm["spec"]["endpoints"][0]["port"], "metrics")
        self.assertIs(sm["spec"]["endpoints"][0]["honorLabels"], True,
                      "the metrics' own namespace label (the TrainingJob's) is kept")
        # It selects both Services, and each has a port named metrics.
        sel = sm["spec"]["selector"]
        selected = []
        for svc in find(docs, "Service"):
            labels = svc["metadata"]["labels"]
            if sel["matchLabels"].items() <= labels.items() and all(
                    labels.get(e["key"]) in e["values"] for e in sel["matchExpressions"]):
                selected.append(svc["metadata"]["name"])
                self.assertIn("metrics", [p["name"] for p in svc["spec"]["ports"]])
        self.assertEqual(sorted(selected), ["release-name-star-agent", "release-name-star-operator"])
        # The workers: every TrainingJob worker pod, on the port the operator names.
        pm = one(docs, "PodMonitor")
        self.assertEqual(pm["metadata"]["labels"]["release"], "prom")
        endpoint = pm["spec"]["podMetricsEndpoints"][0]
        self.assertEqual(endpoint["port"], "star-metrics")
        self.assertIs(endpoint["honorLabels"], True)
        self.assertEqual(pm["spec"]["namespaceSelector"], {"any": True})
        self.assertIn({"key": "star.dev/job", "operator": "Exists"}, pm["spec"]["selector"]["matchExpressions"])
        rule = one(docs, "PrometheusRule")
        with open(os.path.join(CHART, "rules", "star-rules.yaml")) as f:
            self.assertEqual(rule["spec"]["groups"], yaml.safe_load(f)["groups"])
        self.assertIn("StarOperatorAbsent", [r.get("alert") for g in rule["spec"]["groups"] for r in g["rules"]])
        dashboards = sorted(glob.glob(os.path.join(CHART, "dashboards", "*.json")))
        maps = find(docs, "ConfigMap")
        self.assertEqual(len(maps), len(dashboards))
        for path in dashboards:
            name = os.path.basename(path)
            cm = one(docs, "ConfigMap", "release-name-star-dashboard-" + name[:-len(".json")])
            self.assertEqual(cm["metadata"]["labels"]["grafana_dashboard"], "1")
            self.assertEqual(cm["metadata"]["annotations"], {"grafana_folder": "STAR"})
            with open(path) as f:
                self.assertEqual(json.loads(cm["data"][name]), json.load(f))
        star_job = one(docs, "ConfigMap", "release-name-star-dashboard-star-job")
        self.assertEqual(json.loads(star_job["data"]["star-job.json"])["uid"], "star-job")

    def test_worker_pod_monitor_follows_the_watched_namespace_and_can_be_off(self):
        docs = render(*MATRIX["monitoring"], "--set", "operator.watchNamespace=team")
        self.assertEqual(one(docs, "PodMonitor")["spec"]["namespaceSelector"], {"matchNames": ["team"]})
        docs = render(*MATRIX["monitoring"], "--set", "serviceMonitor.workers=false")
        self.assertEqual(find(docs, "PodMonitor"), [])
        one(docs, "ServiceMonitor")

    @unittest.skipUnless(shutil.which("promtool"), "promtool unavailable (apt-get install prometheus)")
    def test_operator_absent_alert_works_with_fullname_override(self):
        # Regression: StarOperatorAbsent matched up{job=~".*star-operator.*"}; with
        # fullnameOverride the operator's Service (so the scrape job) is named otherwise.
        docs = render(*MATRIX["monitoring"], "--set", "fullnameOverride=acme-ml", namespace="ml")
        service = [d["metadata"]["name"] for d in find(docs, "Service")
                   if d["metadata"]["labels"].get("app.kubernetes.io/component") == "operator"]
        self.assertEqual(service, ["acme-ml-operator"])
        target = 'job="%s", namespace="ml", instance="10.0.0.9:9402"' % service[0]
        rule = [r for g in one(docs, "PrometheusRule")["spec"]["groups"] for r in g["rules"]
                if r.get("alert") == "StarOperatorAbsent"][0]
        tests = [{"name": "operator up under its override name", "interval": "1m",
                  "input_series": [{"series": "up{%s}" % target, "values": "1x20"},
                                   {"series": 'star_operator_reconcile_total{result="success", %s}' % target,
                                    "values": "0+1x20"}],
                  "alert_rule_test": [{"eval_time": "20m", "alertname": "StarOperatorAbsent",
                                       "exp_alerts": []}]},
                 {"name": "operator gone", "interval": "1m",
                  "input_series": [{"series": "up{%s}" % target, "values": "0x20"}],
                  "alert_rule_test": [{"eval_time": "20m", "alertname": "StarOperatorAbsent",
                                       "exp_alerts": [{"exp_labels": {"severity": "critical"},
                                                       "exp_annotations": rule["annotations"]}]}]}]
        with tempfile.TemporaryDirectory() as tmp:
            rules = os.path.join(tmp, "rules.yaml")
            with open(rules, "w") as f:
                yaml.safe_dump({"groups": one(docs, "PrometheusRule")["spec"]["groups"]}, f)
            test = os.path.join(tmp, "test.yaml")
            with open(test, "w") as f:
                yaml.safe_dump({"rule_files": [rules], "evaluation_interval": "1m", "tests": tests}, f)
            p = subprocess.run(["promtool", "test", "rules", test], capture_output=True, text=True,
                               timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_monitoring_off_by_default(self):
        docs = render()
        for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"):
            self.assertEqual(find(docs, kind), [], kind)

    def test_dashboard_labels_and_folder(self):
        docs = render("--set", "dashboards.enabled=true,dashboards.folder=ML,dashboards.labels.team=ml")
        cm = one(docs, "ConfigMap", "release-name-star-dashboard-star-job")
        self.assertEqual(cm["metadata"]["annotations"], {"grafana_folder": "ML"})
        self.assertEqual(cm["metadata"]["labels"]["team"], "ml")
        self.assertEqual(cm["metadata"]["labels"]["grafana_dashboard"], "1")
        docs = render("--set", "dashboards.enabled=true,dashboards.folder=")
        self.assertNotIn("annotations", one(docs, "ConfigMap", "release-name-star-dashboard-star-job")["metadata"])

    def test_private_registry(self):
        docs = render(*MATRIX["private-registry"])
        for kind, name in (("Deployment", "star-operator"), ("DaemonSet", "star-agent")):
            w = one(docs, kind)
            self.assertEqual(container(w)["image"], f"registry.example.com/star/{name}:1.2.3")
            self.assertEqual(container(w)["imagePullPolicy"], "Always")
            self.assertEqual(w["spec"]["template"]["spec"]["imagePullSecrets"], [{"name": "regcred"}])

    def test_values_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            yaml.safe_dump({"image": {"registry": "registry.example.com/", "tag": "2.0.0"},
                            "operator": {"replicas": 3}}, f)
            f.flush()
            docs = render("--values", f.name, "--set", "image.tag=2.0.1")
        dep = one(docs, "Deployment")
        self.assertEqual(container(dep)["image"], "registry.example.com/star-operator:2.0.1")
        self.assertEqual(dep["spec"]["replicas"], 3)
        self.assertIn("--leader-elect", container(dep)["args"])

    def test_watch_namespace(self):
        docs = render(*MATRIX["watch-namespace"])
        c = container(one(docs, "Deployment"))
        self.assertIn("--namespace=team-a", c["args"])
        role = one(docs, "Role", "release-name-star-operator")
        self.assertEqual(role["metadata"]["namespace"], "team-a")
        binding = one(docs, "RoleBinding", "release-name-star-operator")
        self.assertEqual(binding["metadata"]["namespace"], "team-a")
        self.assertEqual(binding["roleRef"], {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                              "name": "release-name-star-operator"})
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": "release-name-star-operator",
                                                "namespace": "default"}])
        # Only cluster-scoped resources stay in the operator's ClusterRole.
        cluster = one(docs, "ClusterRole", "release-name-star-operator")
        self.assertEqual(sorted(r for rule in cluster["rules"] for r in rule["resources"]),
                         ["nodeallocations", "nodes"])

    def test_replicas_two_turns_on_leader_election(self):
        docs = render(*MATRIX["replicas-2"])
        dep = one(docs, "Deployment")
        self.assertEqual(dep["spec"]["replicas"], 2)
        args = container(dep)["args"]
        for a in ("--leader-elect", "--lease-duration=15s", "--renew-period=5s", "--retry-period=2s"):
            self.assertIn(a, args)
        self.assertEqual(dep["spec"]["strategy"]["rollingUpdate"], {"maxSurge": 0, "maxUnavailable": "100%"})
        role = one(docs, "Role", "release-name-star-operator-leader-election")
        self.assertEqual(role["metadata"]["namespace"], "default")
        self.assertIn({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                       "resourceNames": ["star-operator"], "verbs": ["get", "update"]}, role["rules"])
        one(docs, "RoleBinding", "release-name-star-operator-leader-election")
        # The lease follows --namespace.
        docs = render(*MATRIX["replicas-2-watch-namespace"])
        role = one(docs, "Role", "release-name-star-operator-leader-election")
        self.assertEqual(role["metadata"]["namespace"], "team-a")
        # One replica: no election, no lease permissions.
        self.assertEqual([r for r in find(render(), "Role") if r["metadata"]["name"].endswith("-leader-election")], [])

    def test_report_tls(self):
        docs = render(*MATRIX["report-tls"])
        dep = one(docs, "Deployment")
        c = container(dep)
        for a in ("--report-url=https://release-name-star-operator.default.svc:8443",
                  "--report-tls-cert-file=/etc/star/report-tls/tls.crt",
                  "--report-tls-key-file=/etc/star/report-tls/tls.key",
                  "--report-ca-file=/etc/star/report-tls/ca.crt"):
            self.assertIn(a, c["args"])
        self.assertEqual(c["volumeMounts"], [{"name": "report-tls", "mountPath": "/etc/star/report-tls",
                                              "readOnly": True}])
        self.assertEqual(dep["spec"]["template"]["spec"]["volumes"],
                         [{"name": "report-tls", "secret": {"secretName": "star-report-tls"}}])
        self.assertFalse([a for a in container(one(render(*MATRIX["report-plain"]), "Deployment"))["args"] if "tls" in a])
        # Certificates from a public CA: workers use their system's CAs.
        docs = render(*MATRIX["report-tls"], "--set", "operator.reportTLS.caKey=")
        args = container(one(docs, "Deployment"))["args"]
        self.assertIn("--report-tls-cert-file=/etc/star/report-tls/tls.crt", args)
        self.assertFalse([a for a in args if a.startswith("--report-ca-file")])

    def test_report_tls_is_on_by_default_with_the_operators_own_certificate(self):
        docs = render()
        dep = one(docs, "Deployment")
        args = container(dep)["args"]
        svc = "release-name-star-operator.default.svc"
        for a in (f"--report-url=https://{svc}:8443",
                  "--report-tls-secret=default/release-name-star-operator-report-tls",
                  f"--report-tls-host={svc}", f"--report-tls-host={svc}.cluster.local"):
            self.assertIn(a, args)
        self.assertFalse([a for a in args if a.startswith(("--report-tls-cert-file", "--report-ca-file"))])
        self.assertNotIn("volumes", dep["spec"]["template"]["spec"])
        role = one(docs, "Role", "release-name-star-operator-report-tls")
        self.assertEqual(role["metadata"]["namespace"], "default")
        self.assertEqual(role["rules"], [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["release-name-star-operator-report-tls"],
             "verbs": ["get", "update"]}])
        binding = one(docs, "RoleBinding", "release-name-star-operator-report-tls")
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": "release-name-star-operator",
                                                "namespace": "default"}])
        args = container(one(render("--set", "operator.reportTLS.managedSecretName=mine"), "Deployment"))["args"]
        self.assertIn("--report-tls-secret=default/mine", args)
        # Plain HTTP only when asked for; an existing Secret needs no Role.
        plain = render(*MATRIX["report-plain"])
        self.assertIn("--report-url=http://release-name-star-operator.default.svc:8443",
                      container(one(plain, "Deployment"))["args"])
        self.assertEqual(find(plain, "Role"), [])
        self.assertEqual(find(render(*MATRIX["report-tls"]), "Role"), [])

    def test_network_policy(self):
        docs = render()
        np = one(docs, "NetworkPolicy", "release-name-star-operator")
        dep = one(docs, "Deployment")
        self.assertEqual(np["spec"]["podSelector"]["matchLabels"], dep["spec"]["selector"]["matchLabels"])
        self.assertEqual(np["spec"]["policyTypes"], ["Ingress"])
        report, metrics = np["spec"]["ingress"]
        self.assertEqual(report["from"], [{"namespaceSelector": {},
                                           "podSelector": {"matchExpressions": [{"key": "star.dev/job",
                                                                                 "operator": "Exists"}]}}])
        self.assertEqual(report["ports"], [{"port": 8443, "protocol": "TCP"}])
        self.assertEqual(metrics["from"], [{"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": "monitoring"}}}])
        self.assertEqual(metrics["ports"], [{"port": 8080, "protocol": "TCP"}])
        docs = render("--set", "operator.reportPort=9443,networkPolicy.metricsNamespaceSelector.matchLabels.team=obs")
        report, metrics = one(docs, "NetworkPolicy")["spec"]["ingress"]
        self.assertEqual(report["ports"], [{"port": 9443, "protocol": "TCP"}])
        self.assertEqual(metrics["from"][0]["namespaceSelector"]["matchLabels"]["team"], "obs")
        self.assertEqual(find(render(*MATRIX["report-plain"]), "NetworkPolicy"), [])

    def test_named_release(self):
        docs = render_case("named-release")
        names = sorted(d["metadata"]["name"] for d in docs)
        self.assertEqual(set(names), {"star-operator", "star-agent", "star-operator-report-tls"})
        for d in docs:
            if d["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
                self.assertEqual(d["metadata"]["namespace"], "star-system", d["kind"])
        self.assertIn("--report-url=https://star-operator.star-system.svc:8443",
                      container(one(docs, "Deployment"))["args"])

    def test_include_crds_first_and_verbatim(self):
        rc, out, _ = run_render("--include-crds")
        self.assertEqual(rc, 0)
        crds = sorted(glob.glob(os.path.join(CHART, "crds", "*.yaml")))
        expected = ""
        for path in crds:
            with open(path) as f:
                expected += f"---\n# Source: star/crds/{os.path.basename(path)}\n{f.read()}\n"
        self.assertTrue(out.startswith(expected))
        docs = [d for d in yaml.safe_load_all(out) if d]
        self.assertEqual([d["kind"] for d in docs[:len(crds)]], ["CustomResourceDefinition"] * len(crds))
        self.assertNotIn("CustomResourceDefinition", run_render()[1])


def at(path):
    """How helm's values.schema.json validation names the values path a.b.c: at '/a/b/c'."""
    return "at '" + "".join("/" + k for k in path.split(".") if k) + "'"


class SchemaTest(unittest.TestCase):
    def assert_rejected(self, args, *words):
        rc, out, err = run_render(*args)
        self.assertEqual(rc, 1, f"{args}: exit {rc}, stdout {out[:200]}")
        self.assertEqual(out, "")
        for w in words:
            self.assertIn(w, err)
        return err

    def test_wrong_type(self):
        self.assert_rejected(["--set", "operator.replicas=two"], at("operator.replicas"), "want integer")
        self.assert_rejected(["--set", "agent.enabled=yes"], at("agent.enabled"), "want boolean")
        self.assert_rejected(["--set", "serviceMonitor.labels.release=1"], at("serviceMonitor.labels.release"),
                             "want string")
        self.assert_rejected(["--set", "image.tag=3"], at("image.tag"), "want string")

    def test_wrong_type_in_values_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write("operator:\n  resources: 1\n")
            f.flush()
            self.assert_rejected(["--values", f.name], at("operator.resources"), "want object")

    def test_unknown_key(self):
        self.assert_rejected(["--set", "operator.replica=2"], at("operator"), "'replica' not allowed")
        self.assert_rejected(["--set", "agent.resources.request.cpu=1"], at("agent.resources"),
                             "'request' not allowed")
        self.assert_rejected(["--set", "bogus=1"], at(""), "'bogus' not allowed")

    def test_enum_and_range(self):
        self.assert_rejected(["--set", "agent.cgroupDriver=cgroupv2"], at("agent.cgroupDriver"), "systemd")
        self.assert_rejected(["--set", "operator.replicas=0"], at("operator.replicas"), "minimum")
        self.assert_rejected(["--set", "image.pullPolicy=Sometimes"], at("image.pullPolicy"), "IfNotPresent")
        self.assert_rejected(["--set", "operator.statusInterval=2 seconds"], at("operator.statusInterval"),
                             "pattern")

    def test_removing_a_required_key(self):
        self.assert_rejected(["--set", "image.tag=null"], at("image"), "missing property 'tag'")

    def test_failed_fail_is_an_execution_error(self):
        self.assert_rejected(["--set", "operator.reportURL=http://star.example:8443"],
                             "operator.reportURL must be https://",
                             "execution error at (star/templates/operator-deployment.yaml")

    def test_failed_fail(self):
        self.assert_rejected(["--set", "operator.reportTLS.enabled=true,operator.reportTLS.secretName=s",
                              "--set", "operator.reportURL=http://star.example:8443"],
                             "operator.reportURL must be https://")

    def test_every_defined_level_closed(self):
        with open(os.path.join(CHART, "values.schema.json")) as f:
            schema = json.load(f)
        self.assertEqual(schema["$schema"], "http://json-schema.org/draft-07/schema#")
        open_levels = []

        def walk(node, where):
            if isinstance(node, dict):
                if "properties" in node and node.get("additionalProperties") is not False:
                    open_levels.append(where)
                for k, v in node.items():
                    walk(v, f"{where}/{k}")
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(v, f"{where}/{i}")
        walk(schema, "#")
        self.assertEqual(open_levels, [])

    def test_contract_values(self):
        with open(os.path.join(CHART, "values.yaml")) as f:
            v = yaml.safe_load(f)
        for path in ("image.registry", "image.tag", "image.pullPolicy", "operator.replicas",
                     "operator.watchNamespace", "operator.resources", "agent.enabled", "agent.cgroupDriver",
                     "agent.resources", "serviceMonitor.enabled", "serviceMonitor.labels",
                     "prometheusRule.enabled", "dashboards.enabled", "dashboards.labels", "dashboards.folder"):
            node = v
            for k in path.split("."):
                self.assertIn(k, node, path)
                node = node[k]
        self.assertEqual(v["image"]["tag"], "")  # the chart's appVersion
        self.assertEqual(v["dashboards"]["labels"], {"grafana_dashboard": "1"})
        with open(os.path.join(CHART, "values.schema.json")) as f:
            schema = json.load(f)
        self.assertEqual(schema["properties"]["agent"]["properties"]["cgroupDriver"]["enum"],
                         ["cgroupfs", "systemd"])


class ChartFilesTest(unittest.TestCase):
    def test_crds_are_byte_identical_to_the_top_level_crds(self):
        top = sorted(os.path.basename(p) for p in glob.glob(os.path.join(SOURCE, "crds", "*")))
        chart = sorted(os.path.basename(p) for p in glob.glob(os.path.join(CHART, "crds", "*")))
        self.assertEqual(chart, top)
        self.assertTrue(top)
        for name in top:
            with open(os.path.join(SOURCE, "crds", name), "rb") as a, open(os.path.join(CHART, "crds", name), "rb") as b:
                self.assertEqual(a.read(), b.read(), f"helm/star/crds/{name} differs from crds/{name}")

    def test_chart_version_is_the_project_version(self):
        with open(os.path.join(CHART, "Chart.yaml")) as f:
            chart = yaml.safe_load(f)
        self.assertEqual(chart["apiVersion"], "v2")
        self.assertEqual(chart["name"], "star")
        self.assertEqual(chart["version"], project_version())
        self.assertEqual(chart["appVersion"], project_version())

    def test_rules_and_dashboards_parse(self):
        with open(os.path.join(CHART, "rules", "star-rules.yaml")) as f:
            rules = yaml.safe_load(f)
        self.assertIn("star", [g["name"] for g in rules["groups"]])
        for g in rules["groups"]:
            for r in g["rules"]:
                self.assertTrue(("alert" in r) != ("record" in r), r)
                self.assertTrue(r["expr"])
        paths = glob.glob(os.path.join(CHART, "dashboards", "*.json"))
        self.assertTrue(paths)
        uids = []
        for p in paths:
            with open(p) as f:
                uids.append(json.load(f)["uid"])
        self.assertIn("star-job", uids)
        self.assertEqual(len(uids), len(set(uids)))


class LintTest(unittest.TestCase):
    """`helm lint --strict` (warnings fail as errors do) with the default values and with
    each case of the render matrix."""

    def test_strict_lint_passes_over_the_matrix(self):
        for case, args in MATRIX.items():
            namespace = RELEASES.get(case, ("", "default"))[1]
            with self.subTest(case=case):
                rc, out, err = helm_lint(args, namespace=namespace)
                self.assertEqual(rc, 0, f"{case}:\n{out}{err}")
                self.assertIn("1 chart(s) linted, 0 chart(s) failed", out)
                self.assertNotIn("[WARNING]", out)
                self.assertNotIn("[ERROR]", out)

    def test_lint_rejects_values_the_schema_rejects(self):
        rc, out, err = helm_lint(["--set", "operator.replicas=two"])
        self.assertNotEqual(rc, 0)
        self.assertIn("[ERROR] values.yaml: - " + at("operator.replicas"), out)


# The Kubernetes API calls of each component, as (apiGroup, resource, verb). The test below
# finds the same calls in the code (client->Get/List/Create/Update/MergePatch/Delete on a
# ResourceRef, and the informers' list + watch):
#   operator: operator/src/reconciler/*.cc (cache.cc informers; training_job_reconciler.cc,
#             status_records.cc, reallocator.cc, node_allocation_reconciler.cc,
#             event_recorder.cc) and kube/src/leader_election.cc (leases, replicas > 1);
#   agent:    node-agent/src/k8s/k8s_source.cc and node_event.cc.
# trainingjobs/finalizers update is no call: the operator's pods, Service and Secret name
# their TrainingJob as owner with blockOwnerDeletion (job_objects.cc), which the
# OwnerReferencesPermissionEnforcement admission plugin allows only with it.
OPERATOR_CALLS = {
    ("", "pods", "list"), ("", "pods", "watch"), ("", "pods", "create"), ("", "pods", "delete"),
    ("", "pods", "get"),
    ("", "services", "list"), ("", "services", "watch"), ("", "services", "create"),
    ("", "secrets", "get"), ("", "secrets", "create"), ("", "secrets", "update"),
    ("", "events", "create"),
    ("", "nodes", "get"),
    ("star.dev", "trainingjobs", "list"), ("star.dev", "trainingjobs", "watch"),
    ("star.dev", "trainingjobs", "patch"), ("star.dev", "trainingjobs", "delete"),
    ("star.dev", "trainingjobs/status", "patch"),
    ("star.dev", "nodeallocations", "list"), ("star.dev", "nodeallocations", "watch"),
    ("star.dev", "nodeallocations", "get"), ("star.dev", "nodeallocations", "create"),
    ("star.dev", "nodeallocations", "update"),
    ("kueue.x-k8s.io", "workloads", "get"),
    ("scheduling.volcano.sh", "podgroups", "create"), ("scheduling.volcano.sh", "podgroups", "get"),
    ("scheduling.volcano.sh", "podgroups", "patch"),
}
OPERATOR_NOT_CALLS = {("star.dev", "trainingjobs/finalizers", "update")}
LEASE_CALLS = {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}
AGENT_CALLS = {
    ("star.dev", "nodeallocations", "list"), ("star.dev", "nodeallocations", "watch"),
    ("star.dev", "nodeallocations/status", "patch"),
    ("", "events", "create"),
}

REFS = {"Pods": ("", "pods"), "Services": ("", "services"), "Events": ("", "events"),
        "Leases": ("coordination.k8s.io", "leases"), "TrainingJobs": ("star.dev", "trainingjobs"),
        "NodeAllocations": ("star.dev", "nodeallocations"), "Secrets": ("", "secrets")}
VERBS = {"Get": "get", "List": "list", "Create": "create", "Update": "update", "UpdateStatus": "update",
         "MergePatch": "patch", "Delete": "delete", "Watch": "watch"}


def call_arguments(text, open_paren):
    """The text between the parenthesis at open_paren and its match."""
    depth = 0
    for i in range(open_paren, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[open_paren + 1:i]
    raise AssertionError("unbalanced call")


def resource_of(ref):
    m = re.match(r"\s*(?:kube::)?(\w+)\(\)", ref)
    if m:
        return REFS[m.group(1)]
    m = re.match(r'\s*\{"([^"]*)",\s*"[^"]*",\s*"([^"]*)"', ref)
    if m:
        return (m.group(1), m.group(2))
    raise AssertionError(f"unknown ResourceRef {ref!r}")


def calls_in(paths):
    """(group, resource, verb) of every kube::Client call in the files."""
    found = set()
    for path in paths:
        with open(path) as f:
            text = f.read()
        for m in re.finditer(r"(?:client_?|client\(\))(?:\.|->)(Get|List|Create|Update|UpdateStatus|MergePatch|Delete|Watch)\(", text):
            args = call_arguments(text, m.end() - 1)
            group, resource = resource_of(args)
            verb = m.group(1)
            if verb == "UpdateStatus" or (verb == "MergePatch" and re.search(r"true\s*$", args)):
                resource += "/status"
            found.add((group, resource, VERBS[verb]))
        # Informers list and watch.
        for m in re.finditer(r"case Kind::k\w+: return kube::(\w+)\(\);", text):
            found |= {(*REFS[m.group(1)], v) for v in ("list", "watch")}
        for m in re.finditer(r"informer_\(&client, kube::(\w+)\(\)", text):
            found |= {(*REFS[m.group(1)], v) for v in ("list", "watch")}
    return found


def rules_of(docs, account):
    """(group, resource, verb, resourceNames, namespace) granted to a ServiceAccount."""
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
             for d in docs if d["kind"] in ("Role", "ClusterRole")}
    granted = set()
    for b in docs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s["kind"] == "ServiceAccount" and s["name"] == account for s in b["subjects"]):
            continue
        ns = b["metadata"].get("namespace")
        role = roles[(b["roleRef"]["kind"], ns if b["roleRef"]["kind"] == "Role" else None, b["roleRef"]["name"])]
        for rule in role["rules"]:
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        granted.add((g, r, v, tuple(rule.get("resourceNames", ())), ns))
    return granted


class RbacTest(unittest.TestCase):
    CASES = ["defaults", "watch-namespace", "replicas-2", "replicas-2-watch-namespace", "named-release"]

    def test_the_expected_calls_are_the_codes(self):
        operator_files = [p for p in glob.glob(os.path.join(SOURCE, "operator", "src", "reconciler", "*.cc"))
                          if not p.endswith("_test.cc")]
        self.assertEqual(calls_in(operator_files), OPERATOR_CALLS)
        self.assertEqual(calls_in([os.path.join(SOURCE, "kube", "src", "leader_election.cc")]), LEASE_CALLS)
        self.assertEqual(calls_in([os.path.join(SOURCE, "node-agent", "src", "k8s", f)
                                   for f in ("k8s_source.cc", "node_event.cc")]),
                         AGENT_CALLS)

    def test_no_wildcards(self):
        for case in self.CASES + ["monitoring", "report-tls"]:
            for d in render_case(case):
                for rule in d.get("rules", []) if d["kind"] in ("Role", "ClusterRole") else []:
                    for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                        for value in rule.get(field, []):
                            self.assertNotIn("*", value, f"{case}: {d['kind']} {d['metadata']['name']} {field}")
                    self.assertNotIn("nonResourceURLs", rule)

    def test_operator_gets_exactly_its_calls(self):
        for case in self.CASES:
            docs = render_case(case)
            account = one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
            granted = rules_of(docs, account)
            expected = OPERATOR_CALLS | OPERATOR_NOT_CALLS
            if "--leader-elect" in container(one(docs, "Deployment"))["args"]:
                expected = expected | LEASE_CALLS
            self.assertEqual({g[:3] for g in granted}, expected, case)
            watch = "team-a" if "watch-namespace" in case else None
            for g, r, v, names, ns in granted:
                if r in ("nodes", "nodeallocations"):
                    self.assertIsNone(ns, f"{case}: {r} needs a ClusterRole")
                elif r == "secrets" and ns == ("star-system" if case == "named-release" else "default") \
                        and (v == "create" or names == (f"{account}-report-tls",)):
                    pass  # the report endpoint's own certificate (report_certificate.cc)
                elif r == "leases":
                    release_ns = "star-system" if case == "named-release" else "default"
                    self.assertEqual(ns, watch or release_ns, case)
                    if v != "create":
                        self.assertEqual(names, ("star-operator",), case)
                else:
                    self.assertEqual(ns, watch, f"{case}: {r} granted in {ns}")

    def test_agent_gets_exactly_its_calls(self):
        for case in self.CASES:
            docs = render_case(case)
            account = one(docs, "DaemonSet")["spec"]["template"]["spec"]["serviceAccountName"]
            granted = rules_of(docs, account)
            self.assertEqual({g[:3] for g in granted}, AGENT_CALLS, case)
            self.assertEqual({g[4] for g in granted}, {None}, case)


def npm_dir():
    """A directory with kubernetes-models installed (npm ci from tests/helm's lock file),
    or raises SkipTest when npm or the registry cannot be had."""
    target = os.environ.get("STAR_HELM_NPM_DIR") or os.path.join(tempfile.gettempdir(), "star-helm-npm")
    os.makedirs(target, exist_ok=True)
    marker = os.path.join(target, "node_modules", ".star-lock")
    with open(os.path.join(HERE, "package-lock.json"), "rb") as f:
        lock = f.read()
    try:
        with open(marker, "rb") as f:
            if f.read() == lock:
                return target
    except OSError:
        pass
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise unittest.SkipTest("kubernetes-models unavailable: node or npm is not installed")
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(os.path.join(HERE, name), os.path.join(target, name))
    p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--prefer-offline"], cwd=target,
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise unittest.SkipTest("kubernetes-models unavailable: npm ci failed (offline?): " + p.stderr[-500:])
    with open(marker, "wb") as f:
        f.write(lock)
    return target


class KubernetesModelsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.modules = os.path.join(npm_dir(), "node_modules")

    def validate(self, docs):
        env = dict(os.environ, NODE_PATH=self.modules)
        p = subprocess.run(["node", os.path.join(HERE, "validate.js")], input=json.dumps(docs),
                           capture_output=True, text=True, env=env, timeout=120)
        return p.returncode, p.stdout.splitlines()

    def test_every_rendered_object_is_valid(self):
        total = 0
        for case, args in MATRIX.items():
            docs = render_case(case, "--include-crds", hooks=True)
            rc, lines = self.validate(docs)
            self.assertEqual(rc, 0, f"{case}:\n" + "\n".join(lines))
            self.assertEqual(len([l for l in lines if l.startswith("ok ")]), len(docs), case)
            total += len(docs)
        print(f"\nkubernetes-models: {total} objects valid over {len(MATRIX)} cases", file=sys.stderr)

    def test_the_validator_rejects_a_broken_object(self):
        dep = one(render(), "Deployment")
        container(dep)["ports"][0]["containerPort"] = "eighty"
        del dep["spec"]["selector"]
        rc, lines = self.validate([dep])
        self.assertEqual(rc, 1)
        self.assertTrue(lines[0].startswith("invalid Deployment"), lines)
        rc, lines = self.validate([{"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "x"}}])
        self.assertEqual(rc, 1)
        self.assertTrue(lines[0].startswith("unknown Thing"), lines)


if __name__ == "__main__":
    if not helm_available():
        sys.exit("STAR_HELM must name the helm binary")
    unittest.main()
