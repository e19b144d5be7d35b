"""A tenant of a shared cluster as the abuse tests see it: a ServiceAccount with a Role
that grants TrainingJobs and pods in its own namespace and nothing else, and kubectl
acting as it (a token from the TokenRequest API)."""
import json
import os

import k8s
from daemon import token_kubeconfig

ACCOUNT = "tenant"


def role(ns):
    return {
        "apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT, "namespace": ns}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": ACCOUNT, "namespace": ns},
             "rules": [{"apiGroups": ["star.dev"], "resources": ["trainingjobs"], "verbs": ["*"]},
                       {"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": ACCOUNT, "namespace": ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
             "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": ns}]},
        ]}


class Tenant:
    """kubectl as the tenant of namespace `ns` (which must exist)."""

    def __init__(self, ns, tmp):
        self.ns = ns
        k8s.kubectl_ok("apply", "-f", "-", stdin=json.dumps(role(ns)))
        self.kubeconfig = token_kubeconfig(os.path.join(tmp, f"tenant-{ns}.kubeconfig"), ACCOUNT, ns)

    def kubectl(self, *args, stdin=None):
        return k8s.kubectl(*args, "-n", self.ns, stdin=stdin, kubeconfig=self.kubeconfig)

    def apply(self, obj):
        """kubectl apply as the tenant: the CompletedProcess (it may be refused)."""
        return self.kubectl("apply", "-f", "-", stdin=json.dumps(obj))

    def can(self, verb, resource, ns):
        p = k8s.kubectl("auth", "can-i", verb, resource, "--namespace", ns, kubeconfig=self.kubeconfig)
        return p.stdout.strip() == "yes"
