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
#include "star/test_support/http.h"

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

  int64_t Egress(const std::string& node, const std::string& pod) {
    json e = Entry(node, pod);
    return e.is_object() ? e["network"].value("egressBitsPerSecond", int64_t{0}) : -1;
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
  // With `fm_egress` / `nb_egress`, the jobs' pods declare that egress bandwidth.
  void StartJobs(const std::string& node_cpu, const std::string& nb_request, const std::string& nb_limit,
                 const std::string& fm_egress = "", const std::string& nb_egress = "") {
    MakeNode("node-0", node_cpu);
    if (HasFatalFailure()) return;
    StartOperator();
    ASSERT_EQ(Kubectl({"apply", "-f", "-"}, ReallocJob("fm", 4, "1", "1", 0, fm_egress)).exit_code, 0);
    ASSERT_EQ(Kubectl({"apply", "-f", "-"}, ReallocJob("nb", 1, nb_request, nb_limit, 0, nb_egress)).exit_code, 0);
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

  // The plans kept on `node`'s NodeAllocation (none when absent).
  JobPlans StoredPlans(const std::string& node) {
    json na = GetJson({"get", "nodeallocations", NodeName(node)});
    if (!na.is_object()) return {};
    const json annotations = na["metadata"].value("annotations", json::object());
    if (!annotations.contains(kReallocationPlansAnnotation)) return {};
    auto plans = PlansFromAnnotation(annotations[kReallocationPlansAnnotation].get<std::string>(), NodeName(node));
    EXPECT_TRUE(plans.ok()) << plans.status();
    return plans.ok() ? *plans : JobPlans{};
  }

  bool HasPlan() { return StoredPlans("node-0").count(JobKey("fm")) > 0; }

  // Nothing a job's owner reads names another job's pods: its TrainingJob and its Events.
  void ExpectNoOtherPodIn(const std::string& job, const std::string& other_uid) {
    EXPECT_EQ(GetJson({"get", "tj", job}).dump().find(other_uid), std::string::npos);
    for (const json& e : GetJson({"get", "events"})["items"]) {
      if (e["involvedObject"]["name"] != job) continue;
      EXPECT_EQ(e.value("message", "").find(other_uid), std::string::npos) << e.dump();
    }
  }
};

TEST_F(ReallocationE2eTest, AStragglerGetsCpuFromTheFreeNodeAndTheNeighborUntilItsJobIsDeleted) {
  // node-0 has 4 CPUs: fm's worker 0 (1 CPU) and nb's worker (2 CPUs, request 500m).
  StartJobs("4", "500m", "2");
  ASSERT_TRUE(Eventually([&] { return Quota("node-0", "fm-worker-0") == 1000 && Quota("node-0", "nb-worker-0") == 2000; }))
      << ReadFile(dir_.path() + "/operator.log");
  SendReports();

  // fm's loop asks for resources for worker 0 (it needs no mode change for that). The
  // plan and its allocations: written together into node-0's NodeAllocation. fm's worker 0
  // gets about 1.8 CPUs more: 1 free, the rest from nb (not below its 100m floor).
  ASSERT_TRUE(Eventually([&] {
    return HasPlan() && Quota("node-0", "fm-worker-0") > 1000 && Quota("node-0", "nb-worker-0") < 2000;
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "nodeallocations", NodeName("node-0")}).dump(2);
  const int64_t fm0 = Quota("node-0", "fm-worker-0"), nb0 = Quota("node-0", "nb-worker-0");
  EXPECT_GE(nb0, 100);
  EXPECT_LE(fm0 + nb0, 4000) << "node-0 is not overcommitted";
  EXPECT_EQ(Quota("node-1", "fm-worker-1"), 1000) << "pods that do not straggle keep their limit";
  EXPECT_EQ(StoredPlans("node-0")[JobKey("fm")].size(), 2u);
  ASSERT_TRUE(Eventually([&] { return HasEvent("fm", "Reallocated"); }));
  const std::string nb_uid = GetJson({"get", "pod", "nb-worker-0"})["metadata"]["uid"];
  ExpectNoOtherPodIn("fm", nb_uid);

  // A restarted operator keeps the plan (it reads it back from the NodeAllocation) and
  // writes the same allocations; a job that stops running (a failed pod restarts the
  // gang) gives everything back.
  op_.Kill();
  StartOperator();
  const json before = GetJson({"get", "nodeallocations", NodeName("node-0")});
  ASSERT_TRUE(Eventually([&] { return HasEvent("fm", "Reallocated") && HasPlan(); }));
  EXPECT_EQ(Quota("node-0", "fm-worker-0"), fm0);
  EXPECT_EQ(Quota("node-0", "nb-worker-0"), nb0) << before.dump(2);
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

// The co-located sender: fm's worker 0 and nb's worker share node-0's NIC and declare
// their bandwidth (kubernetes.io/egress-bandwidth); worker 0's communication slows. The
// operator moves bandwidth from nb to it through node-0's NodeAllocation (what the agent
// shapes), says so in an Event and in star_job_bandwidth_allocation_bits_per_second, and
// gives it back when the worker is fast again.
TEST_F(ReallocationE2eTest, ACommunicationStragglerGetsTheCoLocatedSendersBandwidthAndGivesItBack) {
  metrics_listen_ = "127.0.0.1:" + std::to_string(e2e::FreePort());
  StartJobs("4", "500m", "2", "1G", "800M");
  ASSERT_TRUE(Eventually([&] {
    return Egress("node-0", "fm-worker-0") == 1'000'000'000 && Egress("node-0", "nb-worker-0") == 800'000'000;
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "nodeallocations", NodeName("node-0")}).dump(2)
      << GetJson({"get", "pod", "fm-worker-0"})["metadata"].dump(2);
  EXPECT_EQ(Egress("node-1", "fm-worker-1"), 1'000'000'000);

  e2e::StragglerReports slow{JobKey("fm"), 4, 150, 0, 30, 3.0, 11, 0.03};
  slow.slow_communication = true;
  e2e::SendReports(report_url_, Token("fm"), slow);
  ASSERT_TRUE(Eventually([&] {
    return HasPlan() && Egress("node-0", "fm-worker-0") > 1'000'000'000 && Egress("node-0", "nb-worker-0") < 800'000'000;
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "nodeallocations", NodeName("node-0")}).dump(2)
      << GetJson({"get", "events"}).dump(1);
  const int64_t fm0 = Egress("node-0", "fm-worker-0"), nb0 = Egress("node-0", "nb-worker-0");
  EXPECT_LE(fm0 + nb0, 1'800'000'000) << "node-0's declared bandwidth is not overcommitted";
  EXPECT_EQ(Quota("node-0", "nb-worker-0"), 2000) << "a communication straggler takes no CPU";
  EXPECT_EQ(Egress("node-1", "fm-worker-1"), 1'000'000'000) << "pods that do not straggle keep theirs";
  const json stragglers = GetJson({"get", "tj", "fm"})["status"].value("stragglers", json::array());
  ASSERT_EQ(stragglers.size(), 1u) << stragglers.dump();
  EXPECT_EQ(stragglers[0].value("cause", ""), "communication");
  ASSERT_TRUE(Eventually([&] { return HasEvent("fm", "Reallocated", "kbit/s"); })) << GetJson({"get", "events"}).dump(1);
  const std::string metrics = test_support::Get("http://" + metrics_listen_, "/metrics").body;
  EXPECT_NE(metrics.find("star_job_bandwidth_allocation_bits_per_second{namespace=\"" + ns_ +
                         "\",node=\"" + NodeName("node-0") + "\",pod=\"" + ns_ + "/fm-worker-0\",trainingjob=\"fm\"} " +
                         std::to_string(fm0)),
            std::string::npos)
      << metrics;

  e2e::SendWorkerZeroRecoveredReports(report_url_, Token("fm"), JobKey("fm"));
  ASSERT_TRUE(Eventually([&] {
    return !HasPlan() && Egress("node-0", "fm-worker-0") == 1'000'000'000 &&
           Egress("node-0", "nb-worker-0") == 800'000'000;
  })) << ReadFile(dir_.path() + "/operator.log") << GetJson({"get", "nodeallocations", NodeName("node-0")}).dump(2);
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
  EXPECT_FALSE(HasPlan());
}

// A job's owner writes a plan of their own on the job, in the annotation where plans were
// once kept, throttling another job's pod to 1 millicore: nothing happens to that pod.
TEST_F(ReallocationE2eTest, APlanWrittenOnTheJobByItsOwnerThrottlesNobody) {
  StartJobs("4", "500m", "2");
  ASSERT_TRUE(Eventually([&] { return Quota("node-0", "nb-worker-0") == 2000; }))
      << ReadFile(dir_.path() + "/operator.log");
  const std::string nb_uid = GetJson({"get", "pod", "nb-worker-0"})["metadata"]["uid"];
  const json forged = {{"pods", {{nb_uid, {{"node", NodeName("node-0")}, {"job", JobKey("nb")}, {"cpu", 1}, {"bps", 0}}}}}};
  ASSERT_EQ(Kubectl({"annotate", "tj", "fm", "star.dev/reallocation=" + forged.dump()}).exit_code, 0);
  // The operator has read the edit once it reconciled the generation that follows it.
  PatchAndAwaitReconcile("fm", R"({"spec":{"mitigation":{"amp":{"enabled":true}}}})");
  // node-0's NodeAllocation is written after that (a third job's pod arrives there), with
  // every plan in force at the time.
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, ReallocJob("nc", 1, "100m", "100m")).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Pods("nc").size() == 1; })) << ReadFile(dir_.path() + "/operator.log");
  SetPodPhase("nc-worker-0", "Running", "node-0");
  ASSERT_TRUE(Eventually([&] { return Entry("node-0", "nc-worker-0").is_object(); }))
      << ReadFile(dir_.path() + "/operator.log");
  EXPECT_EQ(Quota("node-0", "nb-worker-0"), 2000);
  EXPECT_FALSE(HasPlan());
  EXPECT_TRUE(StoredPlans("node-0").empty());
}

}  // namespace
}  // namespace star::op
