#include "star/operator/reconciler/cache.h"

#include <gtest/gtest.h>

#include "star/core/api/node_allocation.h"
#include "star/operator/reconciler/job_objects.h"

namespace star::op {
namespace {

using nlohmann::json;

json Job() {
  return {{"apiVersion", "star.dev/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata",
           {{"name", "fm"},
            {"namespace", "team"},
            {"uid", "u-1"},
            {"generation", 2},
            {"resourceVersion", "41"},
            {"finalizers", {kFinalizer}},
            {"annotations",
             {{kRestartsAnnotation, "1"}, {"kubectl.kubernetes.io/last-applied-configuration", "{\"spec\":{}}"}}},
            {"managedFields", {{{"manager", "kubectl"}, {"fieldsV1", {{"f:spec", json::object()}}}}}}}},
          {"spec",
           {{"workers",
             {{"replicas", 2},
              {"template",
               {{"spec",
                 {{"containers",
                   {{{"name", "t"},
                     {"image", "img"},
                     {"resources", {{"requests", {{"cpu", "250m"}}}, {"limits", {{"cpu", "500m"}}}}}}}}}}}}}},
            {"training", {{"globalBatchSize", 64}, {"targetAccuracy", 0.9}}}}},
          {"status", {{"phase", "Running"}, {"syncMode", "ssgd"}, {"k", 2}, {"observedGeneration", 2}}}};
}

// Worker `rank` of Job() as the API server sends it back once bound to `node`: the pod the
// operator made, with what the server and the kubelet add.
json ServedPod(int rank, const std::string& node, const std::string& phase) {
  auto spec = api::TrainingJobSpecFromJson(Job()["spec"], "spec");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  auto pods = DesiredPods(Job(), *spec, PodEnvOptions{"http://op:8443"});
  EXPECT_TRUE(pods.ok()) << pods.status().ToString();
  json pod = (*pods)[static_cast<size_t>(rank)];
  pod["metadata"]["uid"] = "pod-uid-" + std::to_string(rank);
  pod["metadata"]["resourceVersion"] = "77";
  pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z";
  pod["metadata"]["managedFields"] = {{{"manager", "star-operator"},
                                       {"operation", "Update"},
                                       {"fieldsV1", {{"f:spec", {{"f:containers", json::object()}}}}}}};
  pod["spec"]["nodeName"] = node;
  pod["spec"]["containers"][0]["terminationMessagePath"] = "/dev/termination-log";
  pod["spec"]["volumes"] = {{{"name", "kube-api-access"}, {"projected", {{"sources", json::array()}}}}};
  pod["status"] = {{"phase", phase},
                   {"conditions", {{{"type", "PodScheduled"}, {"status", "True"}}}},
                   {"qosClass", "Burstable"},
                   {"hostIP", "10.0.0.1"}};
  if (phase == "Failed") pod["status"]["message"] = "OOMKilled";
  return pod;
}

json Trimmed(Kind kind, json object) {
  TrimForCache(kind, &object);
  return object;
}

TEST(TrimForCache, APodKeepsWhatTheReconcilerReadsAndNothingElse) {
  const json full = ServedPod(1, "node-a", "Running");
  const json pod = Trimmed(Kind::kPod, full);
  EXPECT_FALSE(pod["metadata"].contains("managedFields"));
  // Only the controller reference, which makes the pod its job's own.
  ASSERT_EQ(pod["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0],
            json({{"apiVersion", "star.dev/v1alpha1"}, {"kind", "TrainingJob"}, {"name", "fm"},
                  {"uid", Job()["metadata"]["uid"]}, {"controller", true}}));
  EXPECT_TRUE(IsControlledBy(pod, Job()["metadata"]["uid"]));
  EXPECT_TRUE(IsStarPod(pod));
  EXPECT_FALSE(pod["spec"]["containers"][0].contains("env"));
  EXPECT_FALSE(pod["spec"].contains("volumes"));
  EXPECT_FALSE(pod["status"].contains("conditions"));
  EXPECT_LT(pod.dump().size() * 3, full.dump().size());
  // The informer's key and re-list comparison.
  EXPECT_EQ(pod["metadata"]["name"], "fm-worker-1");
  EXPECT_EQ(pod["metadata"]["namespace"], "team");
  EXPECT_EQ(pod["metadata"]["resourceVersion"], "77");
  EXPECT_EQ(pod["apiVersion"], "v1");
  EXPECT_EQ(pod["kind"], "Pod");
  EXPECT_EQ(WorkerRank(pod), 1);
  EXPECT_EQ(pod["metadata"]["labels"], full["metadata"]["labels"]);
  EXPECT_EQ(pod["metadata"]["annotations"][kPodTemplateHashAnnotation],
            full["metadata"]["annotations"][kPodTemplateHashAnnotation]);
}

TEST(TrimForCache, APodGivesTheSameAllocationsAndPhaseDecisionsAsTheWholeOne) {
  std::vector<json> full = {ServedPod(0, "node-a", "Running"), ServedPod(1, "node-b", "Running")};
  full[0]["metadata"]["annotations"]["kubernetes.io/egress-bandwidth"] = "800M";
  full[0]["metadata"]["annotations"]["kubernetes.io/ingress-bandwidth"] = "1G";
  std::vector<json> trimmed;
  for (const json& p : full) trimmed.push_back(Trimmed(Kind::kPod, p));
  const auto want = JobAllocationsByNode(full);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(JobAllocationsByNode(trimmed), want);
  EXPECT_EQ(want.at("node-a")[0].uid, "pod-uid-0");
  EXPECT_EQ(want.at("node-a")[0].cpu.quota_millicores, 500);
  // Regression: the cache dropped the bandwidth annotations, so no pod had bandwidth.
  EXPECT_EQ(want.at("node-a")[0].network.egress_bits_per_second, 800'000'000);
  EXPECT_EQ(want.at("node-a")[0].network.ingress_bits_per_second, 1'000'000'000);

  auto input = [](const std::vector<json>& pods) {
    PhaseInput in;
    in.current = api::JobPhase::kRunning;
    in.desired = {"fm-worker-0", "fm-worker-1"};
    for (const json& p : pods) in.observed[p["metadata"]["name"]] = p;
    return in;
  };
  const std::vector<json> failed = {ServedPod(0, "node-a", "Running"), ServedPod(1, "node-b", "Failed")};
  std::vector<json> failed_trimmed;
  for (const json& p : failed) failed_trimmed.push_back(Trimmed(Kind::kPod, p));
  for (const auto& [whole, cached] : {std::pair{full, trimmed}, std::pair{failed, failed_trimmed}}) {
    const PhaseDecision a = DecidePhase(input(whole)), b = DecidePhase(input(cached));
    EXPECT_EQ(a.phase, b.phase);
    EXPECT_EQ(a.action, b.action);
    EXPECT_EQ(a.message, b.message);
  }
  EXPECT_NE(DecidePhase(input(failed_trimmed)).message.find("OOMKilled"), std::string::npos);
}

TEST(TrimForCache, ADeletingPodKeepsItsDeletionTimestamp) {
  json full = ServedPod(0, "node-a", "Running");
  full["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z";
  const json pod = Trimmed(Kind::kPod, full);
  EXPECT_EQ(pod["metadata"]["deletionTimestamp"], "2026-01-01T00:01:00Z");
  EXPECT_TRUE(JobAllocationsByNode({pod}).empty());
}

TEST(TrimForCache, AServiceKeepsItsMetadataOnly) {
  json full = DesiredService(Job());
  full["metadata"]["resourceVersion"] = "9";
  full["metadata"]["managedFields"] = json::array({{{"manager", "star-operator"}}});
  const json service = Trimmed(Kind::kService, full);
  EXPECT_EQ(service, json({{"apiVersion", "v1"},
                           {"kind", "Service"},
                           {"metadata",
                            {{"name", "fm"}, {"namespace", "team"}, {"resourceVersion", "9"},
                             {"labels", {{kJobLabel, "fm"}}}}}}));
}

TEST(TrimForCache, ATrainingJobLosesOnlyManagedFieldsAndTheLastAppliedCopy) {
  const json job = Trimmed(Kind::kTrainingJob, Job());
  json want = Job();
  want["metadata"].erase("managedFields");
  want["metadata"]["annotations"].erase("kubectl.kubernetes.io/last-applied-configuration");
  EXPECT_EQ(job, want);
}

TEST(TrimForCache, ANodeAllocationLosesOnlyManagedFields) {
  api::NodeAllocation a;
  a.name = "node-a";
  a.spec.pods.push_back({});
  a.spec.pods[0].namespace_ = "team";
  a.spec.pods[0].name = "fm-worker-0";
  a.spec.pods[0].uid = "pod-uid-0";
  json full = api::ToJson(a);
  full["metadata"]["resourceVersion"] = "5";
  json want = full;
  full["metadata"]["managedFields"] = json::array({{{"manager", "star-operator"}}});
  EXPECT_EQ(Trimmed(Kind::kNodeAllocation, full), want);
}

TEST(TrimForCache, LeavesWhatIsNotAnObject) {
  for (Kind kind : {Kind::kPod, Kind::kService, Kind::kTrainingJob, Kind::kNodeAllocation}) {
    EXPECT_EQ(Trimmed(kind, json("x")), json("x"));
    EXPECT_EQ(Trimmed(kind, json()), json());
  }
}

}  // namespace
}  // namespace star::op
