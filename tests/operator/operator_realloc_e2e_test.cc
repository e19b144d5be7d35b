// star-operator end to end: resource reallocation. The real binary and the real kubectl
// against the real Kubernetes control plane (cluster_util.h: a namespace and Nodes of the
// test's own); the test plays scheduler and kubelet (Bindings, pod phases) and the workers
// (WorkerReports with the job's token).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster_util.h"
#include "e2e_util.h"
#include "e2e_reports.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/operator/reconciler/reallocation.h"
#include "star/report/client.h"

namespace star::op {
namespace {

using nlohmann::json;
using e2e::Eventually;
using e2e::ReadFile;
using namespace std::chrono_literals;

class ReallocationE2eTest : public e2e::OperatorTest {
 protected:
  // The NodeAllocation entry of `pod` on the test's node `node` (null when absent).
  json Entry(const std::string& node, const std::string& pod) {
    json na = GetJson({"get", "nodeallocations", NodeName(node)});
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

  bool HasEvent(const std::string& job, const std::string& reason, const std::string& message_part = "") {
    json events = GetJson({"get", "events"});
    if (!events.is_object()) return false;
    for (const json& e : events["items"]) {
      if (e.value("reason", "") == reason && e["involvedObject"]["name"] == job &&
          e.value("message", "").find(message_part) != std::string::npos) {
        return true;
      }
    }
    return false;
  }

  // node-0 with `node_cpu` allocatable; the operator; fm (4 workers, 1 CPU each, worker
  // 0 on node-0, the others on node-1) and nb (1 worker on node-0, CPU request and limit
  // as given), all Running.
  void StartJobs(const std::string& node_cpu, const std::string& nb_request, const std::string& nb_limit) {
    MakeNode("node-0", node_cpu);
    if (HasFatalFailure()) return;
    StartOperator();
    ASSERT_EQ(Kubectl({"apply", "-f", "-"}, ReallocJob("fm", 4, "1", "1")).exit_code, 0);
    ASSERT_EQ(Kubectl({"apply", "-f", "-"}, ReallocJob("nb", 1, nb_request, nb_limit)).exit_code, 0);
    ASSERT_TRUE(Eventually([&] { return Pods("fm").size() == 4 && Pods("nb").size() == 1; }))
        << ReadFile(dir_.path() + "/operator.log");
    for (int i = 0; i < 4; ++i) SetPodPhase("fm-worker-" + std::to_string(i), "Running", i == 0 ? "node-0" : "node-1");
    SetPodPhase("nb-worker-0", "Running", "node-0");
    ASSERT_TRUE(Eventually([&] { return GetJson({"get", "tj", "fm"})["status"].value("phase", "") == "Running"; }))
        << ReadFile(dir_.path() + "/operator.log");
  }

  // fm's workers report, worker 0 as a straggler (e2e_reports.h).
  void SendReports() {
    e2e::SendSlowWorkerZeroReports(report_url_, Token("fm"), JobKey("fm"));
  }

  bool HasPlan() { return GetJson({"get", "tj", "fm"})["metadata"]["annotations"].contains(kReallocationAnnotation); }
};

TEST_F(ReallocationE2eTest, AStragglerGetsCpuFromTheFreeNodeAndTheNeighborUntilItsJobIsDeleted) {
  // node-0 has 4 CPUs: fm's worker 0 (1 CPU) and nb's worker (2 CPUs, request 500m).
  StartJobs("4", "500m", "2");
  ASSERT_TRUE(Eventually([&] { return Quota("node-0", "fm-worker-0") == 1000 && Quota("node-0", "nb-worker-0") == 2000; }))
      << ReadFile(dir_.path() + "/operator.log");
  SendReports();

  // fm's loop asks for resources for worker 0 (it needs no mode change for that). The
  // plan: written on the job first, then into node-0's NodeAllocation. fm's worker 0
  // gets about 1.8 CPUs more: 1 free, the rest from nb (not below its 100m floor).
  ASSERT_TRUE(Eventually([&] {
    return HasPlan() && Quota("node-0", "fm-worker-0") > 1000 && Quota("node-0", "nb-worker-0") < 2000;
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "nodeallocations", NodeName("node-0")}).dump(2);
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
    return !HasPlan() && Quota("node-0", "nb-worker-0") == 2000 &&
           HasEvent("fm", "ReallocationUndone", "job not running");
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "nodeallocations", NodeName("node-0")}).dump(2);

  // A deleted job leaves no entry behind.
  ASSERT_EQ(Kubectl({"delete", "tj", "fm", "--wait=false"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] {
    return Quota("node-0", "nb-worker-0") == 2000 && Entry("node-0", "fm-worker-0").is_null();
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "nodeallocations", NodeName("node-0")}).dump(2);
}

TEST_F(ReallocationE2eTest, APlanIsUndoneWhenNoWorkerNeedsResourcesAnyMoreWhileTheJobRuns) {
  StartJobs("4", "500m", "2");
  SendReports();
  ASSERT_TRUE(Eventually([&] { return HasPlan() && Quota("node-0", "nb-worker-0") < 2000; }))
      << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "nodeallocations", NodeName("node-0")}).dump(2);

  // Worker 0 is fast again: once the detector clears it and the loop's hysteresis has
  // passed, fm's request is empty and everything is given back, fm still Running.
  e2e::SendWorkerZeroRecoveredReports(report_url_, Token("fm"), JobKey("fm"));
  ASSERT_TRUE(Eventually([&] {
    return !HasPlan() && Quota("node-0", "nb-worker-0") == 2000 && Quota("node-0", "fm-worker-0") == 1000 &&
           HasEvent("fm", "ReallocationUndone", "no worker needs resources any more");
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "tj", "fm"}).dump(2);
  EXPECT_EQ(GetJson({"get", "tj", "fm"})["status"].value("phase", ""), "Running");
  EXPECT_TRUE(GetJson({"get", "tj", "fm"})["status"].value("stragglers", nlohmann::json::array()).empty());
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
