#include "star/operator/reconciler/pod_group.h"

#include <gtest/gtest.h>

#include "reconciler/desired_pods_for_test.h"

#include "star/operator/reconciler/job_objects.h"

namespace star::op {
namespace {

using nlohmann::json;

json Job(const std::string& scheduler, int workers, int ps, int procs_per_pod = 1) {
  json tmpl = {{"spec", {{"schedulerName", "template-scheduler"}, {"containers", {{{"name", "t"}, {"image", "img"}}}}}}};
  json j = {{"apiVersion", "star.dev/v1alpha1"},
            {"kind", "TrainingJob"},
            {"metadata", {{"name", "fm"}, {"namespace", "team"}, {"uid", "u-1"}}},
            {"spec",
             {{"architecture", ps ? "ParameterServer" : "AllReduce"},
              {"workers", {{"replicas", workers}, {"procsPerPod", procs_per_pod}, {"template", tmpl}}},
              {"training", {{"globalBatchSize", 64 * procs_per_pod}}}}}};
  if (ps) j["spec"]["parameterServers"] = {{"replicas", ps}, {"template", tmpl}};
  if (!scheduler.empty()) j["spec"]["runPolicy"]["schedulerName"] = scheduler;
  return j;
}

std::vector<json> Pods(const json& job) { return testing_util::DesiredPodsOf(job); }

TEST(SchedulerName, VolcanoPodsNameTheSchedulerAndTheirGroup) {
  const auto pods = Pods(Job("volcano", 3, 1));
  ASSERT_EQ(pods.size(), 4u);
  for (const json& p : pods) {
    EXPECT_EQ(p["spec"]["schedulerName"], "volcano");
    EXPECT_EQ(p["metadata"]["annotations"][kVolcanoGroupAnnotation], "fm");
  }
}

TEST(SchedulerName, OtherSchedulerIsOnlySetOnThePods) {
  for (const json& p : Pods(Job("my-scheduler", 2, 0))) {
    EXPECT_EQ(p["spec"]["schedulerName"], "my-scheduler");
    EXPECT_FALSE(p["metadata"].value("annotations", json::object()).contains(kVolcanoGroupAnnotation));
  }
  EXPECT_FALSE(DesiredPodGroup(Job("my-scheduler", 2, 0), Pods(Job("my-scheduler", 2, 0))));
}

TEST(SchedulerName, UnsetKeepsTheTemplates) {
  for (const json& p : Pods(Job("", 2, 0))) EXPECT_EQ(p["spec"]["schedulerName"], "template-scheduler");
}

TEST(DesiredPodGroup, MinMemberCountsWorkerAndServerPodsOwnedByTheJob) {
  const json job = Job("volcano", 3, 2);
  auto pg = DesiredPodGroup(job, Pods(job));
  ASSERT_TRUE(pg);
  EXPECT_EQ((*pg)["apiVersion"], "scheduling.volcano.sh/v1beta1");
  EXPECT_EQ((*pg)["kind"], "PodGroup");
  EXPECT_EQ((*pg)["metadata"]["name"], "fm");
  EXPECT_EQ((*pg)["metadata"]["namespace"], "team");
  EXPECT_EQ((*pg)["spec"]["minMember"], 5);
  ASSERT_EQ((*pg)["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ((*pg)["metadata"]["ownerReferences"][0]["uid"], "u-1");
  EXPECT_EQ((*pg)["metadata"]["ownerReferences"][0]["kind"], "TrainingJob");
  EXPECT_EQ((*pg)["metadata"]["ownerReferences"][0]["controller"], true);
}

TEST(DesiredPodGroup, MinMemberCountsPodsNotProcesses) {
  const json job = Job("volcano", 2, 0, /*procs_per_pod=*/4);
  auto pg = DesiredPodGroup(job, Pods(job));
  ASSERT_TRUE(pg);
  EXPECT_EQ((*pg)["spec"]["minMember"], 2);
}

}  // namespace
}  // namespace star::op
