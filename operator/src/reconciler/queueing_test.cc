#include "star/operator/reconciler/queueing.h"

#include <gtest/gtest.h>

#include "reconciler/desired_pods_for_test.h"

#include "star/core/api/training_job.h"
#include "star/operator/reconciler/cache.h"
#include "star/operator/reconciler/job_objects.h"

namespace star::op {
namespace {

using nlohmann::json;

json Job(const std::string& queue, int workers = 2, int ps = 0) {
  json tmpl = {{"spec", {{"containers", {{{"name", "t"}, {"image", "img"}}}}}}};
  json j = {{"apiVersion", "star.dev/v1alpha1"},
            {"kind", "TrainingJob"},
            {"metadata", {{"name", "fm"}, {"namespace", "team"}, {"uid", "0123abcd-ffff-4000-8000-000000000000"}}},
            {"spec",
             {{"architecture", ps ? "ParameterServer" : "AllReduce"},
              {"workers", {{"replicas", workers}, {"template", tmpl}}},
              {"training", {{"globalBatchSize", 64}}}}}};
  if (ps) j["spec"]["parameterServers"] = {{"replicas", ps}, {"template", tmpl}};
  if (!queue.empty()) j["metadata"]["labels"][kKueueQueueLabel] = queue;
  return j;
}

std::vector<json> Pods(const json& job) { return testing_util::DesiredPodsOf(job); }

std::map<std::string, json> ByName(const std::vector<json>& pods) {
  std::map<std::string, json> out;
  for (const json& p : pods) out[p["metadata"]["name"]] = p;
  return out;
}

json Workload(const std::string& type, const std::string& status, const std::string& reason,
              const std::string& message) {
  return {{"status", {{"conditions", {{{"type", type}, {"status", status}, {"reason", reason}, {"message", message}}}}}}};
}

TEST(KueuePodGroup, QueuedJobsPodsAreOneGatedGroupOfAllWorkersAndServers) {
  const auto pods = Pods(Job("team-queue", 3, 2));
  ASSERT_EQ(pods.size(), 5u);
  for (const json& p : pods) {
    const json& labels = p["metadata"]["labels"];
    EXPECT_EQ(labels[kKueueQueueLabel], "team-queue");
    EXPECT_EQ(labels[kKueueManagedLabel], "true");
    EXPECT_EQ(labels[kKueuePodGroupLabel], "fm-0123abcd");
    EXPECT_EQ(p["metadata"]["annotations"][kKueueGroupTotalCountAnnotation], "5");
    ASSERT_EQ(p["spec"]["schedulingGates"].size(), 1u);
    EXPECT_EQ(p["spec"]["schedulingGates"][0]["name"], kKueueAdmissionGate);
    EXPECT_TRUE(GatedByKueue(p));
  }
}

TEST(KueuePodGroup, TheGateSurvivesTheOperatorsPodCache) {
  const json job = Job("q");
  auto pods = ByName(Pods(job));
  for (auto& [name, p] : pods) TrimForCache(Kind::kPod, &p);
  for (const auto& [name, p] : pods) EXPECT_TRUE(GatedByKueue(p)) << name;
  auto a = AdmissionOf(job, pods, Status::NotFound("no workload"));
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->admitted);
}

TEST(KueuePodGroup, JobWithoutQueueLabelIsLeftAlone) {
  for (const json& p : Pods(Job(""))) {
    EXPECT_FALSE(p["metadata"]["labels"].contains(kKueueManagedLabel));
    EXPECT_FALSE(p["metadata"]["labels"].contains(kKueuePodGroupLabel));
    EXPECT_FALSE(p["spec"].contains("schedulingGates"));
  }
}

TEST(KueuePodGroup, GateIsAddedOnceBesideTheTemplatesGates) {
  json job = Job("q", 1);
  job["spec"]["workers"]["template"]["spec"]["schedulingGates"] = {{{"name", "example.com/other"}},
                                                                    {{"name", kKueueAdmissionGate}}};
  const auto pods = Pods(job);
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0]["spec"]["schedulingGates"].size(), 2u);
}

TEST(KueuePodGroup, GroupNameIsALabelValueUniquePerJob) {
  json job = Job("q");
  job["metadata"]["name"] = std::string(70, 'a');
  const std::string name = KueuePodGroupName(job);
  EXPECT_EQ(name.size(), 63u);
  EXPECT_EQ(name.substr(54), "-0123abcd");
  job["metadata"]["uid"] = "99999999-0000";
  EXPECT_NE(KueuePodGroupName(job), name);
}

TEST(Admission, NoneWithoutQueueOrPods) {
  EXPECT_FALSE(AdmissionOf(Job(""), ByName(Pods(Job(""))), Status::NotFound("x")));
  EXPECT_FALSE(AdmissionOf(Job("q"), {}, Status::NotFound("x")));
}

TEST(Admission, GatedPodsWithoutQuotaSayKueuesMessage) {
  const json job = Job("q");
  const std::string msg =
      "couldn't assign flavors to pod set 1a2b: insufficient quota for cpu in flavor default, "
      "previously considered podsets requests (0) + current podset request (2) > maximum capacity (1)";
  auto a = AdmissionOf(job, ByName(Pods(job)), Workload("QuotaReserved", "False", "Pending", msg));
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->admitted);
  EXPECT_EQ(a->reason, "WaitingForQuota");
  EXPECT_EQ(a->message, msg);
}

TEST(Admission, MissingLocalQueueIsNamed) {
  const json job = Job("nope");
  auto a = AdmissionOf(job, ByName(Pods(job)),
                       Workload("QuotaReserved", "False", "Inadmissible", "LocalQueue nope doesn't exist"));
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->admitted);
  EXPECT_EQ(a->reason, "QueueMissing");
  EXPECT_EQ(a->message, "LocalQueue nope doesn't exist");
}

TEST(Admission, NoWorkloadYetSaysSo) {
  const json job = Job("q");
  auto a = AdmissionOf(job, ByName(Pods(job)), Status::NotFound("workloads fm-0123abcd not found"));
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->admitted);
  EXPECT_EQ(a->reason, "WaitingForWorkload");
  EXPECT_NE(a->message.find("fm-0123abcd"), std::string::npos);
}

TEST(Admission, UngatedPodsAreAdmitted) {
  const json job = Job("q");
  auto pods = ByName(Pods(job));
  for (auto& [name, p] : pods) p["spec"].erase("schedulingGates");
  auto a = AdmissionOf(job, pods, Status::NotFound("not read"));
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->admitted);
  EXPECT_EQ(a->reason, "Admitted");
}

TEST(Admission, WorkloadAdmittedBeforeTheGateGoesCountsAsAdmitted) {
  const json job = Job("q");
  auto a = AdmissionOf(job, ByName(Pods(job)), Workload("Admitted", "True", "Admitted", "The workload is admitted"));
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->admitted);
}

}  // namespace
}  // namespace star::op
