"""STAR's daemons (star-operator, star-agent) as child processes of a k8s test, with the
ServiceAccounts and RBAC that the chart renders and tokens from the TokenRequest API."""
import contextlib
import json
import os
import select
import signal
import subprocess
import time

import yaml

import k8s

RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


class Daemon:
    """A process whose stdout is read line by line and whose stderr goes to a log file;
    stopped with SIGTERM (SIGKILL after 10 s) by stop()."""

    def __init__(self, argv, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.buf = ""

    def wait_line(self, prefix, timeout=60):
        """The rest of the first stdout line that starts with prefix (None on timeout or exit)."""
        deadline = time.monotonic() + timeout
        while True:
            while "\n" in self.buf:
                line, self.buf = self.buf.split("\n", 1)
                if line.startswith(prefix):
                    return line[len(prefix):]
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 4096).decode()
            if not chunk:
                return None
            self.buf += chunk

    def logs(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.log.close()
        return self.proc.returncode


class ChartRbac:
    """The chart's ServiceAccounts, Roles and bindings for release `release` in namespace
    `ns` (helm template with `values`), applied to the cluster; its cluster-scoped objects
    are deleted by delete(). `drop`, a (kind, name, index) of all_rules(), leaves that
    rule out."""

    def __init__(self, release, ns, values=(), drop=None):
        args = [k8s.HELM, "template", release, os.path.join(k8s.SOURCE, "helm", "star"),
                "--namespace", ns, "--kube-version", "v1.36.3"]
        for v in values:
            args += ["--set", v]
        p = k8s.run(args)
        if p.returncode != 0:
            raise AssertionError("helm template: " + p.stderr)
        docs = [d for d in yaml.safe_load_all(p.stdout) if d]
        self.objects = [d for d in docs if d["kind"] in RBAC_KINDS]
        self.release = release
        # The Secret of the operator's own report certificate (named before `drop` applies).
        self.report_tls_secret = next(
            (r["resourceNames"][0] for d in self.objects if d["kind"] == "Role" for r in d.get("rules", [])
             if "secrets" in r.get("resources", []) and r.get("resourceNames")), None)
        if drop:
            kind, name, index = drop
            del self.rules(kind, name.replace("RELEASE", release))["rules"][index]
        self.accounts = {}
        for d in docs:
            if d["kind"] in ("Deployment", "DaemonSet"):
                component = d["metadata"]["labels"].get("app.kubernetes.io/component", d["kind"])
                self.accounts[component] = d["spec"]["template"]["spec"]["serviceAccountName"]
        k8s.kubectl_ok("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                              "items": self.objects}))

    def delete(self):
        for d in self.objects:
            if d["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                k8s.kubectl("delete", d["kind"].lower(), d["metadata"]["name"], "--ignore-not-found")

    def rules(self, kind, name):
        return next(d for d in self.objects if d["kind"] == kind and d["metadata"]["name"] == name)

    def all_rules(self):
        """(kind, name, index) of every rule of every Role and ClusterRole, the release's
        name written RELEASE in the object's name."""
        return [(d["kind"], d["metadata"]["name"].replace(self.release, "RELEASE"), i) for d in self.objects
                if d["kind"] in ("Role", "ClusterRole") for i in range(len(d.get("rules", [])))]


def token_kubeconfig(path, account, ns):
    """A kubeconfig for ServiceAccount ns/account with a token from the TokenRequest API
    (`kubectl create token`), trusting the cluster's CA."""
    token = k8s.kubectl_ok("create", "token", account, "-n", ns, "--duration", "2h").strip()
    with open(os.environ["KUBECONFIG"]) as f:
        admin = yaml.safe_load(f)
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "star", "cluster": cluster}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "star", "context": {"cluster": "star", "user": account, "namespace": ns}}],
        "current-context": "star",
    }
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    return path


class DaemonStack(contextlib.ExitStack):
    """star-agent and star-operator run by a test under the chart's RBAC (self.rbac, a
    ChartRbac the subclass makes), with their logs and journal in self.tmp; stopped on exit."""

    def __init__(self):
        super().__init__()
        self.daemons = {}

    def start(self, name, argv):
        d = Daemon(argv, os.path.join(self.tmp, name + ".log"))
        self.daemons[name] = d
        self.callback(d.stop)
        return d

    def start_agent(self, binary, ns):
        """star-agent on the test node, as the chart's agent ServiceAccount of `ns`."""
        kc = token_kubeconfig(os.path.join(self.tmp, "agent.kubeconfig"), self.rbac.accounts["agent"], ns)
        return self.start("agent", [binary, "--node", k8s.node_name(), "--kubeconfig", kc,
                                    "--cgroup-root", f"star-node-{k8s.subnet()}", "--driver", "cgroupfs",
                                    "--journal", os.path.join(self.tmp, "journal.json"),
                                    "--metrics-address", "", "--poll-ms", "200"])

    def start_operator(self, binary, ns, watch, jobs_in, extra=()):
        """star-operator as the chart's operator ServiceAccount of `ns`, watching `watch`
        ("" = every namespace), its report endpoint on the node's address; returns its
        report URL. Before it stops, the TrainingJobs of `jobs_in` (namespaces) are deleted
        (it handles their finalizer)."""
        kc = token_kubeconfig(os.path.join(self.tmp, "operator.kubeconfig"), self.rbac.accounts["operator"], ns)
        op = self.start("operator", [binary, "--kubeconfig", kc, "--namespace", watch,
                                     "--report-listen", k8s.node_ip() + ":0", "--metrics-listen", "",
                                     "--status-interval", "500ms", *extra])
        url = op.wait_line("report-url ", 60)
        if url is None:
            raise AssertionError("star-operator did not start:\n" + op.logs())
        for jobs_ns in jobs_in:
            self.callback(k8s.kubectl, "delete", "tj", "--all", "-n", jobs_ns, "--timeout=60s")
        return url

    def tls_secret(self):
        """The Secret the chart's RBAC lets the operator keep its certificate in."""
        if not self.rbac.report_tls_secret:
            raise AssertionError("the chart's RBAC names no report certificate Secret")
        return self.rbac.report_tls_secret

    @staticmethod
    def release_jobs(ns):
        """After the daemons stop: a finalizer they could not remove must not hold `ns`."""
        for tj in (k8s.get_json("tj", "-n", ns) or {}).get("items", []):
            k8s.kubectl("patch", "tj", tj["metadata"]["name"], "-n", ns, "--type", "merge",
                        "-p", '{"metadata":{"finalizers":null}}')
