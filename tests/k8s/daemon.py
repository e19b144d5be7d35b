"""STAR's daemons (star-operator, star-agent) as child processes of a k8s test, with the
ServiceAccounts and RBAC that the chart renders and tokens from the TokenRequest API."""
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
