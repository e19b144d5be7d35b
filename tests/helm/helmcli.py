"""The helm binary the chart tests run (STAR_HELM), and the chart they run it on.

helm_template(), helm_lint() and helm_cluster() return (exit status, stdout, stderr) and
never raise on helm's own failures: the tests assert on them. helm_template() and
helm_lint() contact no cluster (`helm template` renders client-side, `helm lint` needs
none); helm_cluster() runs against the cluster of the caller's KUBECONFIG (the k8s
tests' fixture). HELM_* directories point into a temporary directory so that no
repository cache or configuration of the caller's home is read or written.
"""
import atexit
import os
import shutil
import subprocess
import tempfile

HELM = os.environ.get("STAR_HELM", "")
SOURCE = os.environ.get("STAR_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CHART = os.path.join(SOURCE, "helm", "star")
# The Kubernetes version templates and lint see as .Capabilities.KubeVersion, and that
# Chart.yaml's kubeVersion is checked against: the local cluster's (scripts/k8s-tools.sh).
# Without it helm falls back to the version linked into its binary, which a build
# without helm's Makefile ldflags leaves at v1.20.
KUBE_VERSION = "v1.36.3"

_home = tempfile.mkdtemp(prefix="star-helm-home-")
atexit.register(shutil.rmtree, _home, True)
_env = dict(os.environ,
            HELM_CACHE_HOME=os.path.join(_home, "cache"),
            HELM_CONFIG_HOME=os.path.join(_home, "config"),
            HELM_DATA_HOME=os.path.join(_home, "data"),
            # No kubeconfig's context may choose the namespace.
            KUBECONFIG=os.path.join(_home, "no-kubeconfig"))
_env.pop("HELM_NAMESPACE", None)


def helm_available():
    return bool(HELM) and os.access(HELM, os.X_OK)


def helm(*args, timeout=120, env=None):
    """Runs HELM with args; returns (exit status, stdout, stderr)."""
    p = subprocess.run([HELM, *args], capture_output=True, text=True, timeout=timeout, env=env or _env)
    return p.returncode, p.stdout, p.stderr


def helm_cluster(*args, timeout=300):
    """helm ARGS against the cluster of the caller's KUBECONFIG (install, upgrade, get,
    uninstall, ...); returns (exit status, stdout, stderr)."""
    env = dict(_env, KUBECONFIG=os.environ.get("KUBECONFIG", ""))
    return helm(*args, timeout=timeout, env=env)


def helm_template(args=(), release="release-name", namespace="default", chart=CHART):
    """`helm template RELEASE CHART --namespace NAMESPACE ARGS...`, ARGS being helm's own
    flags (--values F, --set k=v, --include-crds, ...)."""
    return helm("template", release, chart, "--namespace", namespace, "--kube-version", KUBE_VERSION, *args)


def helm_lint(args=(), namespace="default", chart=CHART):
    """`helm lint --strict CHART --namespace NAMESPACE ARGS...`: warnings fail too."""
    return helm("lint", "--strict", chart, "--namespace", namespace, "--kube-version", KUBE_VERSION, *args)
