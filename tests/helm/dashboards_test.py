#!/usr/bin/python3
"""Lint of the chart's Grafana dashboards (helm/star/dashboards/*.json) and of the metric
names its Prometheus rules use (ctest -L helm).

- Every dashboard parses, has its stable uid (the file's name), schemaVersion 39, and the
  variables datasource -> namespace -> job -> worker, each query chained on the one before.
- Every panel and target uses the data source `${datasource}`; every target has an expr.
- Every PromQL expression (targets and variable queries, template variables replaced by
  values) parses: promtool check rules, with each as a recording rule (skipped without
  promtool).
- Every metric a dashboard queries is one the code registers (a "star_..." literal in the
  sources of the training shim, the operator or the node agent) or is listed in
  METRICS_TO_ADD; every entry there is still missing from the code and used by a panel.
  The alert rules use only metrics the code registers.
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

UIDS = {"star-job", "star-workers", "star-nodes"}
VARIABLES = ["datasource", "namespace", "job", "worker"]
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

# Metrics panels query that the code does not register yet. Each is a proposal: its type,
# labels and where it would be emitted. Remove an entry when the code registers it (the
# test fails until then, so the list never goes stale).
METRICS_TO_ADD = {}

# Values the template variables take when an expression is checked.
VALUES = {
    "namespace": "team",
    "job": "team/fm",
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

    def test_the_three_dashboards_with_their_stable_uids(self):
        self.assertEqual(set(self.dashboards), UIDS)
        for name, d in self.dashboards.items():
            self.assertEqual(d["uid"], name)
            self.assertEqual(d["schemaVersion"], 39, name)
            self.assertTrue(d["title"].startswith("STAR / "), name)
            self.assertIn("star", d["tags"], name)

    def test_variables_chain_datasource_namespace_job_worker(self):
        for name, d in self.dashboards.items():
            variables = d["templating"]["list"]
            self.assertEqual([v["name"] for v in variables], VARIABLES, name)
            ds, namespace, job, worker = variables
            self.assertEqual((ds["type"], ds["query"]), ("datasource", "prometheus"), name)
            previous = None
            for v in (namespace, job, worker):
                self.assertEqual(v["type"], "query", (name, v["name"]))
                self.assertEqual(v["datasource"], DATASOURCE, (name, v["name"]))
                selector, label = label_values_selector(v["query"])
                self.assertTrue(selector, (name, v["name"], v["query"]))
                self.assertEqual(label, "worker" if v is worker else "job", (name, v["name"]))
                used = set(re.findall(r"\$\{?(\w+)", v["query"]))
                self.assertEqual(used, {previous} if previous else set(), (name, v["name"]))
                previous = v["name"]
            # The operator's job label is "<namespace>/<name>": namespace is its prefix.
            self.assertEqual(re.match(namespace["regex"].strip("/"), "team/fm").group(1), "team")
            self.assertTrue(worker["multi"] and worker["includeAll"], name)

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
