// star-operator end to end: resource reallocation. The real binary and the real kubectl
// against the API emulator; the test plays kubelet (pod phases and bindings) and the
// workers (WorkerReports with the job's token).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e_util.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/operator/reconciler/reallocation.h"
#include "star/shim/reporter.h"

namespace star::op {
namespace {

using nlohmann::json;
using apiserver::testing::ProcessResult;
using e2e::Eventually;
using e2e::ReadFile;
using namespace std::chrono_literals;

// A job of `workers` pods with CPU request and limit as given; AMP off, so a compute
// straggler is the sync mode's to handle.
std::string Job(const std::string& name, int workers, const std::string& request, const std::string& limit) {
  return "apiVersion: star.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: " + name +
         "\n  namespace: default\nspec:\n  workers:\n    replicas: " + std::to_string(workers) +
         "\n    template:\n      spec:\n        containers:\n          - name: trainer\n"
         "            image: ghcr.io/star-dev/fmnist:0.1\n            resources:\n"
         "              requests: {cpu: " + request + "}\n              limits: {cpu: " + limit + "}\n"
         "  training:\n    globalBatchSize: 256\n    targetAccuracy: 0.85\n"
         "  mitigation:\n    detection:\n      window: 5\n    amp:\n      enabled: false\n";
}

class ReallocationE2eTest : public e2e::EmulatorTest {
 protected:
  void TearDown() override {
    op_.Stop();
    EmulatorTest::TearDown();
  }

  void StartOperator() {
    ASSERT_TRUE(op_.Start({STAR_OPERATOR_BINARY, "--kubeconfig", kubeconfig_, "--report-listen", "127.0.0.1:0",
                           "--metrics-listen", "", "--status-interval", "200ms"},
                          dir_.path() + "/operator.log"));
    auto url = op_.WaitForLine("report-url ", 60s);
    ASSERT_TRUE(url.has_value()) << ReadFile(dir_.path() + "/operator.log");
    report_url_ = *url;
  }

  // The NodeAllocation entry of `pod` on `node` (null when absent).
  json Entry(const std::string& node, const std::string& pod) {
    json na = GetJson({"get", "nodeallocations", node});
    if (!na.is_object()) return json();
    for (const json& p : na["spec"]["pods"]) {
      if (p["name"] == pod) return p;
    }
    return json();
  }

  int64_t Quota(const std::string& node, const std::string& pod) {
    json e = Entry(node, pod);
    return e.is_object() ? e["cpu"]["quotaMillicores"].get<int64_t>() : -1;
  }

  bool HasEvent(const std::string& job, const std::string& reason) {
    json events = GetJson({"get", "events"});
    if (!events.is_object()) return false;
    for (const json& e : events["items"]) {
      if (e.value("reason", "") == reason && e["involvedObject"]["name"] == job) return true;
    }
    return false;
  }

  // node-0 with `node_cpu` allocatable; the operator; fm (4 workers, 1 CPU each, worker
  // 0 on node-0, the others on node-1) and nb (1 worker on node-0, CPU request and limit
  // as given), all Running.
  void StartJobs(const std::string& node_cpu, const std::string& nb_request, const std::string& nb_limit) {
    ASSERT_EQ(Kubectl({"apply", "-f", "-"}, "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-0\n").exit_code, 0);
    ProcessResult r = Kubectl({"patch", "node", "node-0", "--subresource=status", "--type=merge", "-p",
                               json{{"status", {{"allocatable", {{"cpu", node_cpu}}}}}}.dump()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    StartOperator();
    ASSERT_EQ(Kubectl({"apply", "-f", "-"}, Job("fm", 4, "1", "1")).exit_code, 0);
    ASSERT_EQ(Kubectl({"apply", "-f", "-"}, Job("nb", 1, nb_request, nb_limit)).exit_code, 0);
    ASSERT_TRUE(Eventually([&] { return Pods("fm").size() == 4 && Pods("nb").size() == 1; }))
        << ReadFile(dir_.path() + "/operator.log");
    for (int i = 0; i < 4; ++i) SetPodPhase("fm-worker-" + std::to_string(i), "Running", i == 0 ? "node-0" : "node-1");
    SetPodPhase("nb-worker-0", "Running", "node-0");
    ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "fm"})["status"].value("phase", "") == "Running"; }))
        << ReadFile(dir_.path() + "/operator.log");
  }

  // fm's workers report 150 iterations with its token; worker 0 computes 3x slower from
  // iteration 30 (with some noise: identical times leave the detector no spread to judge by).
  void SendReports() {
    shim::ReportClientOptions co;
    co.base_url = report_url_;
    co.token = SecretToken(GetJson({"get", "secret", TokenSecretName("fm")})).value_or("");
    auto client = shim::ReportClient::Create(co);
    ASSERT_TRUE(client.ok()) << client.status();
    SendReports(**client);
  }

  static void SendReports(shim::ReportClient& client) {
    std::mt19937_64 rng(11);
    std::lognormal_distribution<double> noise(0.0, 0.03);
    api::WorkerReport rep;
    rep.job = "default/fm";
    rep.local_batch = 64;
    for (int it = 1; it <= 150; ++it) {
      for (int w = 0; w < 4; ++w) {
        rep.worker = w;
        rep.iteration = it;
        rep.time_seconds = it * 0.5;
        rep.compute_seconds = (w == 0 && it >= 30 ? 0.3 : 0.1) * noise(rng);
        rep.communication_seconds = 0.01;
        auto sent = client.Send(rep);
        ASSERT_TRUE(sent.ok()) << sent.status();
      }
    }
  }

  e2e::OperatorProcess op_;
  std::string report_url_;
};

TEST_F(ReallocationE2eTest, AStragglerGetsCpuFromTheFreeNodeAndTheNeighborUntilItsJobIsDeleted) {
  // node-0 has 4 CPUs: fm's worker 0 (1 CPU) and nb's worker (2 CPUs, request 500m).
  StartJobs("4", "500m", "2");
  ASSERT_TRUE(Eventually([&] { return Quota("node-0", "fm-worker-0") == 1000 && Quota("node-0", "nb-worker-0") == 2000; }))
      << ReadFile(dir_.path() + "/operator.log");
  SendReports();
  ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "fm"})["status"].value("syncMode", "ssgd") != "ssgd"; }))
      << GetJson({"get", "tj", "fm"})["status"].dump(2);

  // The plan: written on the job first, then into node-0's NodeAllocation. fm's worker 0
  // gets about 1.8 CPUs more: 1 free, the rest from nb (not below its 100m floor).
  ASSERT_TRUE(Eventually([&] {
    return GetJson({"get", "tj", "fm"})["metadata"]["annotations"].contains(kReallocationAnnotation) &&
           Quota("node-0", "fm-worker-0") > 1000 && Quota("node-0", "nb-worker-0") < 2000;
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "nodeallocations", "node-0"}).dump(2);
  const int64_t fm0 = Quota("node-0", "fm-worker-0"), nb0 = Quota("node-0", "nb-worker-0");
  EXPECT_GE(nb0, 100);
  EXPECT_LE(fm0 + nb0, 4000) << "node-0 is not overcommitted";
  EXPECT_EQ(Quota("node-1", "fm-worker-1"), 1000) << "pods that do not straggle keep their limit";
  auto plan = OverridesFromAnnotation(
      GetJson({"get", "tj", "fm"})["metadata"]["annotations"][kReallocationAnnotation].get<std::string>());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->size(), 2u);
  ASSERT_TRUE(Eventually([&] { return HasEvent("fm", "Reallocated"); }));

  // A restarted operator keeps the plan (it rebuilds it from the annotation); a job
  // that stops running (a failed pod restarts the gang) gives everything back.
  op_.Kill();
  StartOperator();
  SetPodPhase("fm-worker-1", "Failed");
  ASSERT_TRUE(Eventually([&] {
    return !GetJson({"get", "tj", "fm"})["metadata"]["annotations"].contains(kReallocationAnnotation) &&
           Quota("node-0", "nb-worker-0") == 2000 && HasEvent("fm", "ReallocationUndone");
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "nodeallocations", "node-0"}).dump(2);

  // A deleted job leaves no entry behind.
  ASSERT_EQ(Kubectl({"delete", "tj", "fm", "--wait=false"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] {
    return Quota("node-0", "nb-worker-0") == 2000 && Entry("node-0", "fm-worker-0").is_null();
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "nodeallocations", "node-0"}).dump(2);
}

TEST_F(ReallocationE2eTest, AGuaranteedNeighborOnAFullNodeIsNeverThrottled) {
  // node-0 has 2 CPUs: fm's worker 0 (1) and nb's guaranteed worker (1): nothing to give.
  StartJobs("2", "1", "1");
  SendReports();
  ASSERT_TRUE(Eventually([&] { return HasEvent("fm", "ReallocationSkipped"); }))
      << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "tj", "fm"})["status"].dump(2)
      << GetJson({"get", "events"}).dump(1);
  EXPECT_EQ(Quota("node-0", "nb-worker-0"), 1000);
  EXPECT_EQ(Quota("node-0", "fm-worker-0"), 1000);
  EXPECT_FALSE(GetJson({"get", "tj", "fm"})["metadata"]["annotations"].contains(kReallocationAnnotation));
}

}  // namespace
}  // namespace star::op
