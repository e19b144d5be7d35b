// star-operator end to end under injected API faults: the real binary against the real
// Kubernetes control plane (cluster_util.h) through star-faultproxy (fault_proxy.h), which
// injects what the real API server does not produce on demand: slow pod creates, server
// errors, throttling, dropped watches. The real kubectl talks to the API server directly;
// the test plays kubelet by patching pod status.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster_util.h"
#include "e2e_reports.h"
#include "e2e_util.h"
#include "star/test_support/fault_proxy.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/report/client.h"

namespace star::op {
namespace {

using nlohmann::json;
using e2e::Eventually;
using e2e::ReadFile;
using namespace std::chrono_literals;

// The operator's requests go through the proxy.
class OperatorFaultsE2eTest : public e2e::OperatorTest {
 protected:
  void SetUp() override {
    e2e::OperatorTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_NO_FATAL_FAILURE(proxy_.Start(kubeconfig_, dir_.path()));
    operator_kubeconfig_ = proxy_.kubeconfig();
  }

  std::string Logs() { return ReadFile(dir_.path() + "/operator.log") + "\n--- proxy\n" + proxy_.Log(); }

  test_support::FaultProxy proxy_;
};

TEST_F(OperatorFaultsE2eTest, AKilledOperatorRestartsWithNoDuplicateOrOrphanedPods) {
  // Slow pod creates so that the kill lands in the middle of reconciling.
  ASSERT_NO_FATAL_FAILURE(proxy_.Add({{"verb", "create"}, {"resource", "pods"}, {"latencyMs", 100}}));
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("kk", 16)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return !Pods("kk").empty(); })) << Logs();
  op_.Kill();
  const size_t at_kill = Pods("kk").size();
  EXPECT_LT(at_kill, 16u) << "the kill landed after the reconcile: " << proxy_.Rules().dump();
  ASSERT_NO_FATAL_FAILURE(proxy_.Clear());
  StartOperator();
  ASSERT_TRUE(Eventually([&] { return Pods("kk").size() == 16; })) << "pods at the kill: " << at_kill << "\n" << Logs();
  std::set<std::string> names;
  for (const json& p : Pods("kk")) {
    names.insert(p["metadata"]["name"].get<std::string>());
    EXPECT_EQ(p["metadata"]["ownerReferences"].size(), 1u);
  }
  EXPECT_EQ(names.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(names.count("kk-worker-" + std::to_string(i)));
  EXPECT_EQ(GetJson({"get", "services", "-l", std::string(kJobLabel) + "=kk"})["items"].size(), 1u);
}

TEST_F(OperatorFaultsE2eTest, InjectedServerErrorsThrottlingAndDroppedWatchesConverge) {
  ASSERT_NO_FATAL_FAILURE(proxy_.Add({{"verb", "create"}, {"resource", "pods"}, {"status", 500}, {"count", 3}}));
  // The job and its status (the proxy, as RBAC, names a subresource apart).
  ASSERT_NO_FATAL_FAILURE(proxy_.Add({{"verb", "patch"}, {"resource", "trainingjobs"}, {"status", 429}, {"count", 2}}));
  ASSERT_NO_FATAL_FAILURE(proxy_.Add({{"verb", "patch"}, {"resource", "trainingjobs/status"}, {"status", 429}, {"count", 2}}));
  ASSERT_NO_FATAL_FAILURE(proxy_.Add({{"verb", "watch"}, {"resource", "*"}, {"dropWatchAfterEvents", 2}, {"count", 4}}));
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("ff", 4)).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("ff").size() == 4; }, 60s)) << Logs();
  for (int i = 0; i < 4; ++i) SetPodPhase("ff-worker-" + std::to_string(i), "Running");
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "ff"})["status"].value("phase", "") == "Running"; }, 60s))
      << Logs();
  EXPECT_EQ(Pods("ff").size(), 4u);
  // Every fault was injected.
  const json rules = proxy_.Rules();
  ASSERT_EQ(rules.size(), 4u) << rules.dump();
  for (const json& r : rules) EXPECT_EQ(r.value("applied", -1), r.value("count", -2)) << r.dump();
}

// One worker (a thread): `iterations` reports from iteration 1, compute 0.1 s (x
// `slowdown` from iteration 40); counts the reports answered and the decisions seen.
void Worker(const std::string& url, const std::string& token, const std::string& job, int worker, int iterations,
            double slowdown, std::atomic<int>* answered, std::atomic<int>* failed) {
  report::ReportClientOptions co;
  co.base_url = url;
  co.token = token;
  auto client = report::ReportClient::Create(co);
  if (!client.ok()) return void(++*failed);
  api::WorkerReport rep;
  rep.job = job;
  rep.worker = worker;
  rep.local_batch = 64;
  rep.communication_seconds = 0.01;
  for (int it = 1; it <= iterations; ++it) {
    rep.iteration = it;
    rep.time_seconds = it * 0.5;
    rep.compute_seconds = (it >= 40 ? 0.1 * slowdown : 0.1) * (1 + 0.01 * ((it * 7 + worker * 3) % 5));
    auto sent = (*client)->Send(rep);
    if (sent.ok()) {
      ++*answered;
    } else {
      ++*failed;
    }
  }
}

// Regression: the report endpoint recorded a new decision in status on the listener's
// thread, under a lock shared by every job, across the API request and its retries: a
// stalled API server wedged the endpoint and then /healthz (the same thread pool).
TEST_F(OperatorFaultsE2eTest, AStalledApiServerWedgesNeitherTheReportEndpointNorHealthzAndLosesNoDecision) {
  metrics_listen_ = "127.0.0.1:" + std::to_string(e2e::FreePort());
  StartOperator();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("st", 4)).exit_code, 0);
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, JobYaml("crowd", 60)).exit_code, 0);
  std::string st_token, crowd_token;
  ASSERT_TRUE(Eventually([&] {
    st_token = Token("st");
    crowd_token = Token("crowd");
    return !st_token.empty() && !crowd_token.empty();
  }, 60s)) << Logs();
  // Both jobs are registered once a report of each is answered (iteration 0 goes back for none).
  for (const auto& [job, token] : {std::pair{JobKey("st"), st_token}, std::pair{JobKey("crowd"), crowd_token}}) {
    auto client = e2e::NewReportClient(report_url_, token);
    ASSERT_NE(client, nullptr);
    const api::WorkerReport rep = e2e::OneReport(job, 0);
    ASSERT_TRUE(Eventually([&] { return client->Send(rep).ok(); }, 60s)) << job << "\n" << Logs();
  }
  ASSERT_TRUE(Eventually([&] {
    return GetJson({"get", "tj", "st"})["status"].value("phase", "") != "";
  }, 60s)) << Logs();

  // Every request of the operator's now waits 60 s in the proxy.
  ASSERT_NO_FATAL_FAILURE(proxy_.Add({{"verb", "patch"}, {"resource", "trainingjobs/status"}, {"latencyMs", 60000}}));
  ASSERT_NO_FATAL_FAILURE(proxy_.Add({{"verb", "*"}, {"resource", "*"}, {"latencyMs", 60000}}));
  std::atomic<int> answered{0}, failed{0};
  std::vector<std::thread> workers;
  // st: worker 1 computes 4x slower from iteration 40 (a decision); crowd: 60 even workers.
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back(Worker, report_url_, st_token, JobKey("st"), w, 80, w == 1 ? 4.0 : 1.0, &answered, &failed);
  }
  for (int w = 0; w < 60; ++w) {
    workers.emplace_back(Worker, report_url_, crowd_token, JobKey("crowd"), w, 20, 1.0, &answered, &failed);
  }
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(answered.load(), 4 * 80 + 60 * 20);
  EXPECT_EQ(failed.load(), 0);
  // All of that while the stall holds the decision's record: status has none yet.
  const json during = GetJson({"get", "tj", "st"})["status"];
  EXPECT_FALSE(during.contains("decisionEpoch")) << during.dump(2);
  const json rules = proxy_.Rules();
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_GT(rules[0].value("applied", 0), 0) << "the decision's record waits in the proxy: " << rules.dump();
  // Reconciling is not stuck: its requests end with the client's timeout.
  const test_support::HttpReply health = test_support::Get("http://" + metrics_listen_, "/healthz");
  EXPECT_EQ(health.status, 200) << health.body;

  ASSERT_NO_FATAL_FAILURE(proxy_.Clear());
  json st;
  ASSERT_TRUE(Eventually([&] {
    st = GetJson({"get", "tj", "st"})["status"];
    return st.is_object() && st.value("decisionEpoch", int64_t{0}) >= 1;
  }, 120s)) << st.dump(2) << "\n" << Logs();
  // The workers now get the recorded decision.
  auto client = e2e::NewReportClient(report_url_, st_token);
  ASSERT_NE(client, nullptr);
  auto sent = client->Send(e2e::OneReport(JobKey("st"), 81));
  ASSERT_TRUE(sent.ok()) << sent.status();
  ASSERT_TRUE(sent->has_value());
  EXPECT_EQ((*sent)->epoch, st.value("decisionEpoch", int64_t{0}));
  EXPECT_EQ(test_support::Get("http://" + metrics_listen_, "/healthz").status, 200);
}

}  // namespace
}  // namespace star::op
