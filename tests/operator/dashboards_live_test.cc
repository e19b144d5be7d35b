// The chart's Grafana dashboards against a live run: a real Prometheus server (Debian's
// `prometheus`, on loopback) scrapes star-operator's and star-agent's /metrics and the
// four workers' (the training shim's WorkerMetrics endpoints, fed the same iterations the
// workers report) while a job's worker 0 straggles and the operator moves CPU to it
// (agent_e2e.h: real binaries, the real Kubernetes control plane, real cgroup v1 quotas). Every panel's
// query and every variable of helm/star/dashboards/*.json must return at least one series,
// and the panels that show the straggler must show it. Needs root, a cgroup v1 cpu
// hierarchy and prometheus (skipped otherwise).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent_e2e.h"
#include "e2e_util.h"
#include "prometheus_server.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/shim/worker_metrics.h"

namespace star::op {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using e2e::Eventually;
using e2e::FreePort;
using e2e::NodePod;

// What the dashboards' template variables are set to: namespace <ns>, trainingjob fm, all
// workers, and a rate window that covers the whole run.
std::string Substitute(std::string expr, const std::string& ns) {
  const std::vector<std::pair<std::string, std::string>> values = {
      {"$__rate_interval", "5m"}, {"${namespace}", ns}, {"$namespace", ns},
      {"${trainingjob}", "fm"},   {"$trainingjob", "fm"}, {"${worker}", ".*"},
      {"$worker", ".*"}};
  for (const auto& [name, value] : values) {
    for (size_t at = expr.find(name); at != std::string::npos; at = expr.find(name, at + value.size())) {
      expr.replace(at, name.size(), value);
    }
  }
  return expr;
}

struct PanelQuery {
  std::string where;  // "<dashboard>: <panel title>"
  std::string expr;   // variables substituted
};

struct VariableQuery {
  std::string where;
  std::string label, match;  // label_values(match, label)
};

// label_values(MATCH, LABEL) as {LABEL, MATCH}; nullopt for another query.
std::optional<std::pair<std::string, std::string>> LabelValuesOf(const std::string& q) {
  const std::string prefix = "label_values(";
  const size_t comma = q.rfind(',');
  if (q.rfind(prefix, 0) != 0 || q.empty() || q.back() != ')' || comma == std::string::npos) return std::nullopt;
  std::string label = q.substr(comma + 1, q.size() - comma - 2);
  label.erase(0, label.find_first_not_of(' '));
  return std::pair{label, q.substr(prefix.size(), comma - prefix.size())};
}

// Every target of every panel, and every label_values variable, of the chart's dashboards.
void ReadDashboards(const std::string& ns, std::vector<PanelQuery>& panels, std::vector<VariableQuery>& variables) {
  for (const auto& entry : fs::directory_iterator(STAR_DASHBOARDS_DIR)) {
    if (entry.path().extension() != ".json") continue;
    const json d = json::parse(e2e::ReadFile(entry.path().string()));
    const std::string name = entry.path().stem().string();
    for (const json& v : d["templating"]["list"]) {
      const std::string q = v.value("query", json("")).is_string() ? v.value("query", "") : "";
      if (auto lv = LabelValuesOf(q)) {
        variables.push_back({name + ": $" + v.value("name", ""), lv->first, Substitute(lv->second, ns)});
      }
    }
    for (const json& p : d["panels"]) {
      for (const json& t : p.value("targets", json::array())) {
        panels.push_back({name + ": " + p.value("title", ""), Substitute(t.value("expr", ""), ns)});
      }
    }
  }
}

// The value of the series whose `label` is `value` in an instant query's result.
std::optional<double> SeriesValue(const json& result, const std::string& label, const std::string& value) {
  for (const json& s : result) {
    if (s["metric"].value(label, "") == value) return std::stod(s["value"][1].get<std::string>());
  }
  return std::nullopt;
}

// The four workers of a job as the training shim exposes them: each report the
// workers send is also observed here, with the wait a synchronous step makes the faster
// workers spend on the slowest.
class FmWorkers {
 public:
  bool Start(const std::string& job, const std::string& node) {
    for (int w = 0; w < 4; ++w) {
      auto m = shim::WorkerMetrics::Start("127.0.0.1:0", job, w, node);
      if (!m.ok()) return false;
      metrics_.push_back(std::move(*m));
    }
    return true;
  }
  std::vector<std::string> Targets() const {
    std::vector<std::string> out;
    for (const auto& m : metrics_) out.push_back("127.0.0.1:" + std::to_string(m->port()));
    return out;
  }
  // Buffers one iteration's reports; observes them once all four are in.
  void Observe(const api::WorkerReport& r) {
    shim::IterationSample& s = round_[r.worker];
    s.compute_seconds = r.compute_seconds;
    s.communication_seconds = r.communication_seconds;
    s.info.iteration = r.iteration;
    s.info.local_batch = r.local_batch;
    s.info.amp = r.amp;
    if (round_.size() < metrics_.size()) return;
    double slowest = 0;
    for (const auto& [w, sample] : round_) slowest = std::max(slowest, sample.compute_seconds);
    for (auto& [w, sample] : round_) {
      sample.wait_seconds = slowest - sample.compute_seconds;
      metrics_[w]->Observe(sample);
    }
    round_.clear();
  }

 private:
  std::vector<std::unique_ptr<shim::WorkerMetrics>> metrics_;
  std::map<int, shim::IterationSample> round_;
};

class DashboardsLiveTest : public e2e::OperatorAgentTest {
 protected:
  void SetUp() override {
    if (std::string(STAR_PROMETHEUS).empty()) GTEST_SKIP() << "needs prometheus";
    e2e::OperatorAgentTest::SetUp();
  }
};

TEST_F(DashboardsLiveTest, EveryPanelAndVariableReturnsSeriesAndTheStragglerShows) {
  std::vector<PanelQuery> panels;
  std::vector<VariableQuery> variables;
  ReadDashboards(ns_, panels, variables);
  ASSERT_GE(panels.size(), 20u) << "the chart's dashboards in " << STAR_DASHBOARDS_DIR;
  ASSERT_EQ(variables.size(), 9u) << "namespace, trainingjob and worker on the three per-job dashboards";

  metrics_listen_ = "127.0.0.1:" + std::to_string(FreePort());
  const std::string agent_metrics = "127.0.0.1:" + std::to_string(FreePort());
  NodePod fm0, nb0;
  StartOnNode0(fm0, nb0, agent_metrics);
  if (HasFatalFailure()) return;
  FmWorkers workers;
  ASSERT_TRUE(workers.Start(JobKey("fm"), NodeName(e2e::kNode)));
  std::vector<std::string> targets = workers.Targets();
  targets.push_back(metrics_listen_);
  targets.push_back(agent_metrics);
  e2e::PrometheusServer prometheus;
  ASSERT_TRUE(prometheus.Start(STAR_PROMETHEUS, dir_.path(), targets)) << e2e::ReadFile(dir_.path() + "/prometheus.log");
  ASSERT_TRUE(Eventually([&] { return prometheus.TargetsUp() == static_cast<int>(targets.size()); }))
      << "targets up: " << prometheus.TargetsUp() << " of " << targets.size() << Logs();

  // Worker 0 straggles; the operator moves CPU to it and the agent applies the plan.
  SendReports([&](const api::WorkerReport& r) { workers.Observe(r); });
  if (HasFatalFailure()) return;
  // An evaluation, for the accuracy panel.
  auto client = e2e::NewReportClient(report_url_, Token("fm"));
  ASSERT_NE(client, nullptr);
  api::WorkerReport evaluated = e2e::OneReport(JobKey("fm"), 150);
  evaluated.accuracy = 0.5;
  auto sent = client->Send(evaluated);
  ASSERT_TRUE(sent.ok()) << sent.status();
  std::string why;
  ASSERT_TRUE(EventuallyApplied(
      {&fm0, &nb0}, [&](const json& na) { return SpecQuota(na, fm0) > 1000 && SpecQuota(na, nb0) < 2000; }, why))
      << why << Logs();

  // Every query answers with a series once Prometheus has scraped the run (the rates need
  // two scrapes after it).
  std::vector<std::string> empty;
  const bool all = Eventually([&] {
    empty.clear();
    for (const PanelQuery& q : panels) {
      std::string error;
      auto r = prometheus.Query(q.expr, &error);
      if (!r || r->empty()) empty.push_back(q.where + ": " + q.expr + (r ? "" : " (" + error + ")"));
    }
    for (const VariableQuery& v : variables) {
      std::string error;
      auto r = prometheus.LabelValues(v.label, v.match, &error);
      if (!r || r->empty()) empty.push_back(v.where + ": label_values(" + v.match + ", " + v.label + ")");
    }
    return empty.empty();
  });
  std::string list;
  for (const std::string& e : empty) list += "\n  " + e;
  EXPECT_TRUE(all) << "queries without a series:" << list << Logs();

  // What a user looks for: the straggler stands out, is flagged, and got CPU.
  std::string error;
  for (const PanelQuery& q : panels) {
    if (q.where.find("Slowdown against the job's median worker") == std::string::npos) continue;
    auto r = prometheus.Query(q.expr, &error);
    ASSERT_TRUE(r.has_value()) << error;
    EXPECT_GT(SeriesValue(*r, "worker", "0").value_or(0), 1.3) << q.expr << "\n" << r->dump();
    EXPECT_LT(SeriesValue(*r, "worker", "1").value_or(9), 1.1) << q.expr << "\n" << r->dump();
  }
  auto flagged = prometheus.Query(
      "max by (worker) (max_over_time(star_job_worker_straggler{namespace=\"" + ns_ + "\", trainingjob=\"fm\"}[5m]))",
      &error);
  ASSERT_TRUE(flagged.has_value()) << error;
  EXPECT_EQ(SeriesValue(*flagged, "worker", "0"), 1.0) << flagged->dump();
  // The fleet view: the straggler's node shows one flagged worker; the workers' own series
  // carry that node too.
  auto by_node = prometheus.Query(
      "max_over_time((sum by (node) (star_job_worker_straggler))[5m:1s])", &error);
  ASSERT_TRUE(by_node.has_value()) << error;
  EXPECT_EQ(SeriesValue(*by_node, "node", NodeName(e2e::kNode)), 1.0) << by_node->dump();
  auto on_node = prometheus.Query("count(star_worker_iterations_total{namespace=\"" + ns_ +
                                      "\", trainingjob=\"fm\", node=\"" + NodeName(e2e::kNode) + "\"})",
                                  &error);
  ASSERT_TRUE(on_node.has_value()) << error;
  ASSERT_EQ(on_node->size(), 1u) << on_node->dump();
  EXPECT_EQ((*on_node)[0]["value"][1], "4") << on_node->dump();
  auto quota = prometheus.Query("max_over_time(star_node_cpu_quota{pod=\"" + ns_ + "/fm-worker-0\"}[5m])", &error);
  ASSERT_TRUE(quota.has_value()) << error;
  ASSERT_EQ(quota->size(), 1u) << quota->dump();
  EXPECT_GT(std::stod((*quota)[0]["value"][1].get<std::string>()), 1000) << "millicores";
}

}  // namespace
}  // namespace star::op
