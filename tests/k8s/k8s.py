"""What the k8s tests share: kubectl against the fixture's cluster, a namespace of the
test's own, and bounded waits.

Environment (set by tests/k8s/CMakeLists.txt): KUBECONFIG, STAR_KUBECTL, STAR_HELM,
STAR_SOURCE_DIR, STAR_CLUSTER_DIR.
"""
import json
import os
import subprocess
import time
import uuid

KUBECTL = os.environ.get("STAR_KUBECTL", "kubectl")
HELM = os.environ.get("STAR_HELM", "helm")
SOURCE = os.environ.get("STAR_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CLUSTER = os.environ.get("STAR_CLUSTER_DIR", "")


def run(argv, stdin=None, timeout=120, env=None):
    """Runs argv; returns the CompletedProcess (text), never raises on a non-zero exit."""
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, env=env)


def kubectl(*args, stdin=None, kubeconfig=None, timeout=120):
    cfg = ["--kubeconfig", kubeconfig] if kubeconfig else []
    return run([KUBECTL, *cfg, *args], stdin=stdin, timeout=timeout)


def kubectl_ok(*args, **kw):
    """kubectl that must succeed; returns its stdout."""
    p = kubectl(*args, **kw)
    if p.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p.stdout


def get_json(*args, **kw):
    """`kubectl get ... -o json`, parsed; None when kubectl fails (e.g. not found)."""
    p = kubectl("get", *args, "-o", "json", **kw)
    return json.loads(p.stdout) if p.returncode == 0 else None


def eventually(ok, timeout=60, interval=0.2, what="condition", fail=None):
    """Polls ok() until it returns a true value (returned) or timeout seconds pass; then
    the error says what was awaited, and fail() if given (e.g. logs)."""
    deadline = time.monotonic() + timeout
    while True:
        value = ok()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}" +
                                 (f"\n{fail()}" if fail else ""))
        time.sleep(interval)


class Namespace:
    """A namespace of the test's own, deleted (with all in it) on exit."""

    def __init__(self, prefix="t", wait=True):
        self.name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.wait = wait

    def __enter__(self):
        kubectl_ok("create", "namespace", self.name)
        # Pods need the namespace's default ServiceAccount, which the controller manager makes.
        eventually(lambda: kubectl("get", "serviceaccount", "default", "-n", self.name).returncode == 0,
                   what=f"the default ServiceAccount of {self.name}")
        return self

    def __exit__(self, *exc):
        kubectl("delete", "namespace", self.name, f"--wait={str(self.wait).lower()}", "--timeout=120s",
                timeout=150)


def test_node():
    """The Node of star-node (tests may make Nodes of their own beside it)."""
    return get_json("nodes", "-l", "star.dev/test-node=true")["items"][0]


def node_name():
    return test_node()["metadata"]["name"]


def node_ip():
    """The test node's address: where pods reach processes on this machine."""
    return next(a["address"] for a in test_node()["status"]["addresses"] if a["type"] == "InternalIP")


def subnet():
    """The test node's pod subnet number S (pods in 10.214.S.0/24; cgroups under star-node-S)."""
    with open(os.path.join(CLUSTER, "subnet")) as f:
        return f.read().strip()
