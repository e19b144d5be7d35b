#!/usr/bin/python3
"""Lint of the chart's Grafana dashboards (helm/star/dashboards/*.json) and of the metric
names its Prometheus rules use (ctest -L helm).

- Every dashboard parses, has its stable uid (the file's name), schemaVersion 39; the
  per-job dashboards have the variables datasource -> namespace -> trainingjob -> worker,
  each query chained on the one before; the fleet dashboard only datasource.
- Per-job panels select their job exactly: every selector of a star_ metric names
  namespace="$namespace" and trainingjob="$trainingjob" (or an anchored pod regex built
  from them); none uses the label `job` or a `pod=~"...-.*"` prefix.
- Every panel and target uses the data source `${datasource}`; every target has an expr.
- Every PromQL expression (targets and variable queries, template variables replaced by
  values) parses: promtool check rules, with each as a recording rule (skipped without
  promtool).
- Every metric a dashboard queries is one the code registers (a "star_..." literal in the
  sources of the training shim, the operator or the node agent) or is listed in
  METRICS_TO_ADD; every entry there is still missing from the code and used by a panel.
  The alert rules use only metrics the code registers.
- Evaluated by Prometheus's engine (promtool test rules, promql_expr_test): with jobs a and
  ab in the same namespace (and a job a in another), each per-job panel of job a returns
  exactly job a's series.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

SOURCE = os.environ.get("STAR_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART = os.path.join(SOURCE, "helm", "star")
DASHBOARDS = os.path.join(CHART, "dashboards")
RULES = os.path.join(CHART, "rules", "star-rules.yaml")
CODE_DIRS = ["training-shim", "operator", "node-agent", "kube", "report", "cli"]

UIDS = {"star-job", "star-workers", "star-nodes", "star-fleet"}
FLEET = "star-fleet"  # every job and node at once: no job variables
VARIABLES = ["datasource", "namespace", "trainingjob", "worker"]
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

# Metrics panels query that the code does not register yet. Each is a proposal: its type,
# labels and where it would be emitted. Remove an entry when the code registers it (the
# test fails until then, so the list never goes stale).
METRICS_TO_ADD = {}

# Values the template variables take when an expression is checked.
VALUES = {
    "namespace": "team",
    "trainingjob": "fm",
    "worker": "0",
    "datasource": "prometheus",
    "__rate_interval": "1m",
    "__interval": "30s",
    "__range": "1h",
}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
            "unless", "bool", "offset", "inf", "nan", "atan2", "le"}


def substitute(expr):
    """Replaces $var, ${var} and ${var:format} by VALUES; fails on an unknown variable."""
    def value(m):
        name = m.group(1) or m.group(2)
        if name not in VALUES:
            raise KeyError("unknown template variable $" + name + " in " + expr)
        return VALUES[name]
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", value, expr)


def metric_names(expr):
    """The metric names an expression selects (strings, label matchers, ranges, grouping
    lists, functions and keywords left out)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        name = m.group(0)
        if name in KEYWORDS or re.match(r"\s*\(", e[m.end():]):
            continue
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] == "."):
            continue  # a unit or exponent of a number
        names.add(name)
    return names


def label_values_selector(query):
    """The series selector of a label_values(SELECTOR, label) variable query."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query, re.S)
    return (m.group(1), m.group(2)) if m else (None, None)


def code_metrics():
    """Every "star_..." string literal in the sources (tests excluded)."""
    found = set()
    for d in CODE_DIRS:
        for root, _, files in os.walk(os.path.join(SOURCE, d)):
            for f in files:
                if not f.endswith((".cc", ".h")) or f.endswith("_test.cc"):
                    continue
                with open(os.path.join(root, f), errors="replace") as fh:
                    found.update(re.findall(r'"(star_[a-z0-9_]+)"', fh.read()))
    return found


def family(name, known):
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[:-len(suffix)] in known:
            return name[:-len(suffix)]
    return name


def load_dashboards():
    out = {}
    for path in sorted(glob.glob(os.path.join(DASHBOARDS, "*.json"))):
        with open(path) as f:
            out[os.path.basename(path)[:-len(".json")]] = json.load(f)
    return out


def panels_of(dashboard):
    """Every panel, those inside rows included, rows left out."""
    out = []
    for p in dashboard.get("panels", []):
        if p.get("type") == "row":
            out.extend(p.get("panels", []))
        else:
            out.append(p)
    return out


def expressions(dashboard):
    """(where, expr) for every target and every variable's selector."""
    out = []
    for p in panels_of(dashboard):
        for t in p.get("targets", []):
            out.append(("panel %r target %s" % (p.get("title"), t.get("refId")), t.get("expr", "")))
    for v in dashboard["templating"]["list"]:
        if v.get("type") == "query":
            selector, _ = label_values_selector(v.get("query", ""))
            out.append(("variable %s" % v["name"], selector or ""))
    return out


class DashboardsTest(unittest.TestCase):
    def setUp(self):
        self.dashboards = load_dashboards()

    def test_the_four_dashboards_with_their_stable_uids(self):
        self.assertEqual(set(self.dashboards), UIDS)
        for name, d in self.dashboards.items():
            self.assertEqual(d["uid"], name)
            self.assertEqual(d["schemaVersion"], 39, name)
            self.assertTrue(d["title"].startswith("STAR / "), name)
            self.assertIn("star", d["tags"], name)

    def test_variables_chain_datasource_namespace_trainingjob_worker(self):
        fleet = self.dashboards[FLEET]["templating"]["list"]
        self.assertEqual([v["name"] for v in fleet], ["datasource"])
        for name, d in self.dashboards.items():
            if name == FLEET:
                continue
            variables = d["templating"]["list"]
            self.assertEqual([v["name"] for v in variables], VARIABLES, name)
            ds, namespace, job, worker = variables
            self.assertEqual((ds["type"], ds["query"]), ("datasource", "prometheus"), name)
            previous = []  # each query selects by every variable before it
            for v in (namespace, job, worker):
                self.assertEqual(v["type"], "query", (name, v["name"]))
                self.assertEqual(v["datasource"], DATASOURCE, (name, v["name"]))
                selector, label = label_values_selector(v["query"])
                self.assertTrue(selector, (name, v["name"], v["query"]))
                self.assertEqual(label, v["name"], (name, v["name"]))
                used = set(re.findall(r"\$\{?(\w+)", v["query"]))
                self.assertEqual(used, set(previous), (name, v["name"]))
                previous.append(v["name"])
            self.assertTrue(worker["multi"] and worker["includeAll"], name)

    def test_per_job_panels_select_the_job_exactly(self):
        job = 'namespace="$namespace", trainingjob="$trainingjob"'
        pod = 'pod=~"$namespace/$trainingjob-(worker|ps)-[0-9]+"'
        for name, d in self.dashboards.items():
            for where, expr in expressions(d):
                self.assertNotRegex(expr, r'[{,]\s*job\s*=', (name, where))
                self.assertNotRegex(expr, r'pod=~"[^"]*\.\*"', (name, where))
                if name == FLEET:
                    self.assertNotIn("$", expr.replace("$__rate_interval", ""), (name, where))
                    continue
                for selector in re.findall(r"star_\w+(\{[^}]*\})?", expr):
                    if where.startswith("variable"):
                        continue
                    self.assertTrue(job in selector or pod in selector,
                                    "%s, %s: %s does not select the job" % (name, where, expr))

    def test_fleet_shows_stragglers_by_node_and_the_operator(self):
        titles = {p["title"]: p for p in panels_of(self.dashboards[FLEET])}
        self.assertIn("by (node)", titles["Stragglers by node"]["targets"][0]["expr"])
        for moved in ("Reconciles by result", "Reconcile duration", "Decision latency",
                      "Apply outcomes"):
            self.assertIn(moved, titles)
            for name, d in self.dashboards.items():
                if name != FLEET:
                    self.assertNotIn(moved, [p["title"] for p in panels_of(d)], name)
        job = {p["title"]: p for p in panels_of(self.dashboards["star-job"])}
        self.assertIn("star_job_accuracy{", job["Accuracy"]["targets"][0]["expr"])

    def test_every_panel_uses_the_datasource_variable(self):
        for name, d in self.dashboards.items():
            ids = [p["id"] for p in d["panels"]] + [p["id"] for p in panels_of(d)
                                                     if p not in d["panels"]]
            self.assertEqual(len(ids), len(set(ids)), name)
            self.assertTrue(panels_of(d), name)
            for p in panels_of(d):
                where = (name, p.get("title"))
                self.assertTrue(p.get("title"), where)
                self.assertEqual(p.get("datasource"), DATASOURCE, where)
                g = p["gridPos"]
                self.assertLessEqual(g["x"] + g["w"], 24, where)
                self.assertTrue(p.get("targets"), where)
                refs = [t["refId"] for t in p["targets"]]
                self.assertEqual(len(refs), len(set(refs)), where)
                for t in p["targets"]:
                    self.assertEqual(t.get("datasource", DATASOURCE), DATASOURCE, where)
                    self.assertTrue(t.get("expr", "").strip(), where)

    def test_every_metric_queried_exists_or_is_listed_to_add(self):
        known = code_metrics()
        self.assertIn("star_job_sync_mode", known)  # the scan finds the code's metrics
        used = set()
        for name, d in self.dashboards.items():
            for where, expr in expressions(d):
                for m in metric_names(substitute(expr)):
                    f = family(m, known | set(METRICS_TO_ADD))
                    used.add(f)
                    self.assertTrue(f in known or f in METRICS_TO_ADD,
                                    "%s, %s: %s is neither registered in the code nor in "
                                    "METRICS_TO_ADD" % (name, where, m))
        for m in METRICS_TO_ADD:
            self.assertNotIn(m, known, "%s is registered now: remove it from METRICS_TO_ADD" % m)
            self.assertIn(m, used, "%s is in METRICS_TO_ADD but no panel queries it" % m)

    def test_metric_names_finds_selected_metrics_only(self):
        self.assertEqual(
            metric_names('histogram_quantile(0.9, sum by (worker, le) (rate(a_bucket{job="x"}'
                         '[1m]))) / on () group_left () quantile(0.5, b) + 2e3 * max(c offset 5m)'),
            {"a_bucket", "b", "c"})


@unittest.skipUnless(shutil.which("promtool"), "promtool unavailable (apt-get install prometheus)")
class PromqlTest(unittest.TestCase):
    def check(self, exprs):
        """Runs promtool check rules on exprs as recording rules; returns (rc, output)."""
        groups = [{"name": "lint %d" % i, "rules": [{"record": "star_lint:expr", "expr": e}]}
                  for i, e in enumerate(exprs)]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "rules.json")  # JSON is YAML: promtool reads it
            with open(path, "w") as f:
                json.dump({"groups": groups}, f)
            p = subprocess.run(["promtool", "check", "rules", path], capture_output=True,
                               text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    def test_promtool_refuses_a_broken_expression(self):
        rc, out = self.check(['sum by (worker) (rate(star_worker_iterations_total{job="x"}[1m])'])
        self.assertNotEqual(rc, 0, out)

    def test_every_expression_parses(self):
        for name, d in load_dashboards().items():
            exprs = expressions(d)
            rc, out = self.check([substitute(e) for _, e in exprs])
            if rc != 0:
                failed = [exprs[int(i)][0] for i in re.findall(r'group "lint (\d+)"', out)]
                self.fail("%s: %s\n%s" % (name, failed, out))


# Jobs whose names share a prefix with job a (and a job a in another namespace): a per-job
# panel of team/a must select none of their series.
JOB = ("team", "a")
NEIGHBOURS = [("team", "ab"), ("team", "a-2"), ("other", "a")]
SELECTOR = re.compile(r"(star_\w+)\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def series_of(metric, matchers, namespace, name):
    """A series of job namespace/name that the selector's other matchers accept."""
    pod = "%s/%s-worker-0" % (namespace, name)
    labels = {"pod": pod}
    if not metric.startswith("star_node_"):  # the agents know pods, not jobs
        labels.update(namespace=namespace, trainingjob=name)
    for label, op, value in matchers:
        if label in ("namespace", "trainingjob", "pod"):
            continue
        if op == "=":
            labels[label] = value
        elif op == "=~":
            labels[label] = value.split("|")[0].replace(".*", "0")
    if metric.endswith("_bucket"):
        labels["le"] = "1"
    return metric + "{" + ", ".join('%s="%s"' % kv for kv in sorted(labels.items())) + "}"


def selector_tests(dashboards):
    """One promtool test per selector of a per-job panel: with job a and its neighbours'
    series, `group by (namespace, trainingjob, pod)` of the selector is job a's series."""
    values = dict(VALUES, namespace=JOB[0], trainingjob=JOB[1], worker=".*")
    tests = []
    for name, d in sorted(dashboards.items()):
        if name == FLEET:
            continue
        for where, expr in expressions(d):
            if where.startswith("variable"):
                continue
            text = re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], expr)
            for metric, body in SELECTOR.findall(text):
                matchers = MATCHER.findall(body)
                mine = series_of(metric, matchers, *JOB)
                expect = {"pod": "%s/%s-worker-0" % JOB}
                if not metric.startswith("star_node_"):
                    expect.update(namespace=JOB[0], trainingjob=JOB[1])
                tests.append({
                    "name": "%s, %s: %s{%s}" % (name, where, metric, body),
                    "interval": "1m",
                    "input_series": [{"series": series_of(metric, matchers, *j), "values": "1x5"}
                                     for j in [JOB] + NEIGHBOURS],
                    "promql_expr_test": [{
                        "expr": "group by (namespace, trainingjob, pod) (%s{%s})" % (metric, body),
                        "eval_time": "2m",
                        "exp_samples": [{"labels": "{" + ", ".join(
                            '%s="%s"' % kv for kv in sorted(expect.items())) + "}", "value": 1}],
                    }],
                })
    return tests


@unittest.skipUnless(shutil.which("promtool"), "promtool unavailable (apt-get install prometheus)")
class ExactJobTest(unittest.TestCase):
    def run_tests(self, tests):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "selectors_test.json")
            with open(path, "w") as f:
                json.dump({"rule_files": [], "evaluation_interval": "1m", "tests": tests}, f)
            p = subprocess.run(["promtool", "test", "rules", path], capture_output=True,
                               text=True, timeout=120)
        return p.returncode, p.stdout + p.stderr

    def test_jobs_a_ab_and_a_2_do_not_mix(self):
        tests = selector_tests(load_dashboards())
        self.assertGreaterEqual(len(tests), 30)
        rc, out = self.run_tests(tests)
        self.assertEqual(rc, 0, out)

    def test_a_prefix_match_is_caught(self):
        # Regression: the Nodes dashboard selected pod=~"$job-.*", which catches job a-2.
        d = {"star-nodes": {"templating": {"list": []}, "panels": [{"title": "old", "targets": [
            {"refId": "A", "expr": 'max by (pod) (star_node_cpu_quota{pod=~"$namespace/$trainingjob-.*"})'}]}]}}
        rc, out = self.run_tests(selector_tests(d))
        self.assertNotEqual(rc, 0, out)
        self.assertIn("a-2-worker-0", out)


class RulesMetricsTest(unittest.TestCase):
    def test_alert_rules_use_only_registered_metrics(self):
        known = code_metrics()
        with open(RULES) as f:
            text = f.read()
        exprs = []
        # expr: on one line, or folded (>-) over the indented lines after it
        for m in re.finditer(r"^(\s*)expr:\s*(>-|\|)?\s*(.*)$", text, re.M):
            if m.group(2):
                indent = len(m.group(1))
                body = []
                for line in text[m.end() + 1:].splitlines():
                    if line.strip() and len(line) - len(line.lstrip()) <= indent:
                        break
                    body.append(line.strip())
                exprs.append(" ".join(body))
            else:
                exprs.append(m.group(3))
        self.assertGreaterEqual(len(exprs), 4)
        for e in exprs:
            self.assertTrue(metric_names(e), e)
            for m in metric_names(e):
                if m == "up":
                    continue  # Prometheus' own, per target
                self.assertIn(family(m, known), known, "rule expr %r: %s is not registered" % (e, m))


if __name__ == "__main__":
    unittest.main()
