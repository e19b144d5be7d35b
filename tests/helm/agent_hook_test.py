#!/usr/bin/python3
"""The chart's uninstall hook (templates/agent-release-hook.yaml): before `helm uninstall`
deletes anything, a Job runs `star-agent --release-daemonset` (node-agent/src/k8s/
release_daemonset.cc), which switches the agent DaemonSet to release mode through its pod
template's annotation; the DaemonSet hands that annotation to the agent as
$STAR_AGENT_MODE. Rendered by the real helm.

Environment: STAR_HELM (the helm binary), STAR_SOURCE_DIR (the repository).
"""
import os
import re
import unittest

from chart_test import at, container, find, one, render, run_render
from helmcli import SOURCE, helm_available

HOOK = "release-name-star-agent-release"
AGENT = "release-name-star-agent"


def code_annotation():
    """kAgentModeAnnotation, as the agent's code spells it."""
    with open(os.path.join(SOURCE, "node-agent", "include", "star", "agent", "release_daemonset.h")) as f:
        return re.search(r'kAgentModeAnnotation\[\] = "([^"]+)"', f.read()).group(1)


def hooks(docs):
    return [d for d in docs if "helm.sh/hook" in d["metadata"].get("annotations", {})]


@unittest.skipUnless(helm_available(), "STAR_HELM is needed")
class AgentReleaseHookTest(unittest.TestCase):
    def test_the_hook_job_releases_the_agent_daemonset_before_anything_is_deleted(self):
        docs = hooks(render(hooks=True))
        self.assertEqual(sorted((d["kind"], d["metadata"]["name"]) for d in docs),
                         [("Job", HOOK), ("Role", HOOK), ("RoleBinding", HOOK), ("ServiceAccount", HOOK)])
        for d in docs:
            ann = d["metadata"]["annotations"]
            self.assertEqual(ann["helm.sh/hook"], "pre-delete", d["kind"])
            self.assertEqual(ann["helm.sh/hook-delete-policy"], "before-hook-creation,hook-succeeded", d["kind"])
            self.assertEqual(d["metadata"]["namespace"], "default")
            # Its permissions exist before the Job starts.
            self.assertEqual(int(ann["helm.sh/hook-weight"]), 0 if d["kind"] == "Job" else -10, d["kind"])
        job = one(docs, "Job")
        pod = job["spec"]["template"]["spec"]
        self.assertEqual(pod["serviceAccountName"], HOOK)
        self.assertEqual(pod["restartPolicy"], "Never")
        c = container(job)
        self.assertEqual(c["command"], ["star-agent"])
        self.assertEqual(c["args"], ["--node=$(NODE_NAME)", "--in-cluster", f"--release-daemonset={AGENT}",
                                     "--daemonset-namespace=default", "--release-timeout-s=240"])
        self.assertEqual(c["image"], one(render(), "DaemonSet")["spec"]["template"]["spec"]["containers"][0]["image"])
        self.assertEqual(job["spec"]["activeDeadlineSeconds"], 300)
        sc = c["securityContext"]
        self.assertTrue(sc["runAsNonRoot"])
        self.assertEqual(sc["capabilities"], {"drop": ["ALL"]})
        self.assertNotIn("hostNetwork", pod)
        self.assertNotIn("volumes", pod)

    def test_the_hook_may_only_get_and_patch_the_agent_daemonset(self):
        docs = hooks(render(hooks=True))
        self.assertEqual(one(docs, "Role")["rules"], [
            {"apiGroups": ["apps"], "resources": ["daemonsets"], "resourceNames": [AGENT],
             "verbs": ["get", "patch"]}])
        binding = one(docs, "RoleBinding")
        self.assertEqual(binding["roleRef"], {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": HOOK})
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": HOOK, "namespace": "default"}])

    def test_the_daemonset_hands_the_annotation_the_hook_sets_to_the_agent(self):
        ds = one(render(), "DaemonSet")
        env = {e["name"]: e for e in container(ds)["env"]}
        self.assertEqual(env["STAR_AGENT_MODE"]["valueFrom"]["fieldRef"]["fieldPath"],
                         f"metadata.annotations['{code_annotation()}']")

    def test_values_and_release_names(self):
        docs = hooks(render("--set", "agent.restoreTimeoutSeconds=60", release="r", namespace="ops", hooks=True))
        job = one(docs, "Job")
        self.assertIn("--release-daemonset=r-star-agent", container(job)["args"])
        self.assertIn("--daemonset-namespace=ops", container(job)["args"])
        self.assertIn("--release-timeout-s=60", container(job)["args"])
        self.assertEqual(job["spec"]["activeDeadlineSeconds"], 120)
        self.assertEqual(hooks(render("--set", "agent.restoreOnUninstall=false", hooks=True)), [])
        self.assertEqual(hooks(render("--set", "agent.enabled=false", hooks=True)), [])
        self.assertEqual(find(render(hooks=False), "Job"), [], "hooks are not part of the release")

    def test_schema_refuses_bad_hook_values(self):
        for args, path in ((["--set", "agent.restoreOnUninstall=yes"], "agent.restoreOnUninstall"),
                           (["--set", "agent.restoreTimeoutSeconds=5"], "agent.restoreTimeoutSeconds")):
            rc, out, err = run_render(*args)
            self.assertEqual(rc, 1, args)
            self.assertIn(at(path), err)


if __name__ == "__main__":
    unittest.main()
