#!/usr/bin/python3
"""The test node (star-node) on the real API server: the scheduler binds pods to it, it
runs their commands with their environment, CPU limit and network namespace, writes their
status, fails a pod whose command does not exist, and completes graceful deletion."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s  # noqa: E402


def pod(name, command, restart="Never", limit="250m", extra_env=None):
    env = [{"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
           {"name": "GREETING", "value": "hello $(MY_IP)"}] + (extra_env or [])
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": restart, "hostname": name, "subdomain": "grp",
                 "containers": [{"name": "main", "image": "debian", "command": command, "env": env,
                                 "resources": {"requests": {"cpu": limit}, "limits": {"cpu": limit}}}]},
    }


def apply(ns, obj):
    import json
    k8s.kubectl_ok("apply", "-n", ns, "-f", "-", stdin=json.dumps(obj))


def phase(ns, name):
    p = k8s.get_json("pod", name, "-n", ns)
    return p["status"].get("phase") if p else None


def log_of(ns, name):
    """The container's output, from the node's state directory (no kubelet serves logs)."""
    uid = k8s.get_json("pod", name, "-n", ns)["metadata"]["uid"]
    path = os.path.join(k8s.CLUSTER, "node", "pods", f"{ns}_{name}_{uid}", "main.log")
    with open(path) as f:
        return f.read()


class NodeTest(unittest.TestCase):
    def test_a_pod_runs_with_its_environment_cgroup_and_names(self):
        with k8s.Namespace("node") as ns:
            script = ("echo \"$GREETING\"; cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null; "
                      "awk -F: '$2 == \"cpu\" {print $3}' /proc/self/cgroup; "
                      "getent hosts a.grp.$NS.svc; ip -o -4 addr show eth0")
            apply(ns.name, pod("a", ["/bin/sh", "-c", script], extra_env=[
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]))
            k8s.eventually(lambda: phase(ns.name, "a") == "Succeeded", what="pod a to succeed")
            p = k8s.get_json("pod", "a", "-n", ns.name)
            ip = p["status"]["podIP"]
            self.assertEqual(p["spec"]["nodeName"], k8s.node_name(), "bound by the scheduler")
            self.assertTrue(ip.startswith("10.214."), ip)
            out = log_of(ns.name, "a")
            self.assertIn(f"hello {ip}", out, "$(VAR) expansion and fieldRef status.podIP")
            self.assertIn("pod" + p["metadata"]["uid"], out, "the pod's own cgroup")
            self.assertIn(f"{ip} ", out, "its name resolves to its IP; eth0 carries it")
            state = p["status"]["containerStatuses"][0]["state"]["terminated"]
            self.assertEqual(state["exitCode"], 0)

    def test_cpu_limit_is_the_cgroup_quota(self):
        with k8s.Namespace("node") as ns:
            apply(ns.name, pod("q", ["/bin/sleep", "300"], limit="300m"))
            k8s.eventually(lambda: phase(ns.name, "q") == "Running", what="pod q to run")
            p = k8s.get_json("pod", "q", "-n", ns.name)
            with open(os.path.join(k8s.CLUSTER, "subnet")) as f:
                subnet = f.read().strip()
            qos = {"Guaranteed": "", "Burstable": "burstable/"}[p["status"]["qosClass"]]
            quota = f"/sys/fs/cgroup/cpu/star-node-{subnet}/kubepods/{qos}pod{p['metadata']['uid']}/cpu.cfs_quota_us"
            with open(quota) as f:
                self.assertEqual(f.read().strip(), "30000")
            k8s.kubectl_ok("delete", "pod", "q", "-n", ns.name, "--timeout=60s")
            self.assertFalse(os.path.exists(quota), "the cgroup goes with the pod")

    def test_exit_codes_and_a_missing_command_fail_the_pod(self):
        with k8s.Namespace("node") as ns:
            apply(ns.name, pod("exit3", ["/bin/sh", "-c", "exit 3"]))
            apply(ns.name, pod("nocmd", ["/no/such/command"]))
            k8s.eventually(lambda: phase(ns.name, "exit3") == "Failed", what="exit3 to fail")
            k8s.eventually(lambda: phase(ns.name, "nocmd") == "Failed", what="nocmd to fail")
            term = k8s.get_json("pod", "exit3", "-n", ns.name)["status"]["containerStatuses"][0]["state"]["terminated"]
            self.assertEqual(term["exitCode"], 3)
            term = k8s.get_json("pod", "nocmd", "-n", ns.name)["status"]["containerStatuses"][0]["state"]["terminated"]
            self.assertEqual(term["reason"], "StartError")
            self.assertIn("/no/such/command", term["message"])

    def test_an_image_without_command_waits_as_an_unpullable_image(self):
        with k8s.Namespace("node") as ns:
            obj = pod("noimg", None)
            del obj["spec"]["containers"][0]["command"]
            obj["spec"]["containers"][0]["image"] = "example.invalid/none:1"
            apply(ns.name, obj)
            def waiting():
                p = k8s.get_json("pod", "noimg", "-n", ns.name)
                st = p["status"].get("containerStatuses") or [{}]
                return st[0].get("state", {}).get("waiting")
            w = k8s.eventually(waiting, what="noimg's waiting state")
            self.assertEqual(w["reason"], "ErrImagePull")
            self.assertEqual(phase(ns.name, "noimg"), "Pending")

    def test_restart_policy_on_failure_restarts(self):
        with k8s.Namespace("node") as ns:
            apply(ns.name, pod("r", ["/bin/sh", "-c", "exit 1"], restart="OnFailure"))
            def restarted():
                p = k8s.get_json("pod", "r", "-n", ns.name)
                st = p["status"].get("containerStatuses") or [{}]
                return st[0].get("restartCount", 0) >= 1
            k8s.eventually(restarted, what="a restart")

    def test_graceful_deletion_stops_the_process(self):
        with k8s.Namespace("node") as ns:
            apply(ns.name, pod("g", ["/bin/sh", "-c", "trap 'echo got-term; exit 0' TERM; while :; do sleep 0.1; done"]))
            k8s.eventually(lambda: phase(ns.name, "g") == "Running", what="pod g to run")
            uid = k8s.get_json("pod", "g", "-n", ns.name)["metadata"]["uid"]
            k8s.kubectl_ok("delete", "pod", "g", "-n", ns.name, "--timeout=60s")
            self.assertIsNone(k8s.get_json("pod", "g", "-n", ns.name))
            path = os.path.join(k8s.CLUSTER, "node", "pods", f"{ns.name}_g_{uid}", "main.log")
            with open(path) as f:
                self.assertIn("got-term", f.read())


if __name__ == "__main__":
    unittest.main()
