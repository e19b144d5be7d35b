// BuildStatus: the NodeAllocation status the agent writes from a reconcile's outcome.
#include "star/agent/k8s_source.h"

#include <string>

#include <gtest/gtest.h>

#include "star/agent/reconciler.h"

namespace star::agent {
namespace {

constexpr char kUid[] = "7a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d";

TEST(BuildStatusTest, DecodeErrorKeepsTheAppliedGenerationAndNamesTheField) {
  api::NodeAllocationStatus previous;
  previous.observed_generation = 3;
  previous.applied.push_back({"ns", "worker-0", kUid, {500, 100}, {}});
  StatusInputs in;
  in.generation = 4;
  in.decode_error = Status::InvalidArgument("spec.pods[0].cpu.weight: must be <= 10000");
  in.have_desired = true;
  in.desired_generation = 3;
  ReconcileResult ok;
  PodResult pod;
  pod.uid = kUid;
  pod.namespace_ = "ns";
  pod.name = "worker-0";
  pod.cpu = {500, 100};
  ok.pods.push_back(pod);
  const StatusOr<ReconcileResult> result = ok;
  in.result = &result;
  in.now = "2025-01-01T00:00:00Z";

  const api::NodeAllocationStatus s = BuildStatus(in, previous);
  EXPECT_EQ(s.observed_generation, 3);
  EXPECT_EQ(s.applied, previous.applied);
  ASSERT_EQ(s.conditions.size(), 4u);
  const api::Condition& ready = s.conditions[0];
  const api::Condition& valid = s.conditions[1];
  EXPECT_EQ(ready.type, "Ready");
  EXPECT_EQ(ready.status, "False");
  EXPECT_EQ(valid.type, "Valid");
  EXPECT_EQ(valid.status, "False");
  EXPECT_EQ(valid.reason, "InvalidSpec");
  EXPECT_NE(valid.message.find("spec.pods[0].cpu.weight"), std::string::npos);
  EXPECT_EQ(valid.observed_generation, 4);
  EXPECT_EQ(s.conditions[2].status, "True") << "generation 3 is still applied";

  // The same inputs later: nothing changes, transition times included.
  in.now = "2025-01-01T00:05:00Z";
  EXPECT_EQ(BuildStatus(in, s), s);
}

TEST(BuildStatusTest, FailedPodsAndRefusalsAreNotApplied) {
  StatusInputs in;
  in.generation = 2;
  in.have_desired = true;
  in.desired_generation = 2;
  in.now = "2025-01-01T00:00:00Z";
  ReconcileResult partly;
  PodResult failed;
  failed.uid = kUid;
  failed.namespace_ = "ns";
  failed.name = "worker-0";
  failed.action = PodAction::kFailed;
  failed.status = Status::NotFound("no cgroup for pod " + std::string(kUid));
  partly.pods.push_back(failed);
  const StatusOr<ReconcileResult> r1 = partly;
  in.result = &r1;
  api::NodeAllocationStatus s = BuildStatus(in, {});
  EXPECT_EQ(s.observed_generation, 2);
  EXPECT_TRUE(s.applied.empty());
  EXPECT_EQ(s.conditions[2].reason, "PodsFailed");
  EXPECT_NE(s.conditions[2].message.find("ns/worker-0"), std::string::npos);
  EXPECT_EQ(s.conditions[0].status, "False");

  const StatusOr<ReconcileResult> refused = Status::InvalidArgument("guarantee violated");
  in.result = &refused;
  in.generation = in.desired_generation = 3;
  s = BuildStatus(in, s);
  EXPECT_EQ(s.observed_generation, 2) << "a refused spec is not observed as applied";
  EXPECT_EQ(s.conditions[2].reason, "Refused");
}

TEST(BuildStatusTest, PodWhoseInterfaceWasNotFoundIsNamedAndCarriesNoNetwork) {
  StatusInputs in;
  in.generation = in.desired_generation = 1;
  in.have_desired = true;
  in.now = "2025-01-01T00:00:00Z";
  ReconcileResult r;
  PodResult pod;
  pod.uid = kUid;
  pod.namespace_ = "ns";
  pod.name = "worker-0";
  pod.action = PodAction::kApplied;
  pod.cpu = {500, 100};
  pod.network = {8000, 0, 1};
  pod.network_skipped = Status::FailedPrecondition("host network");
  r.pods.push_back(pod);
  const StatusOr<ReconcileResult> skipped = r;
  in.result = &skipped;
  api::NodeAllocationStatus s = BuildStatus(in, {});
  ASSERT_EQ(s.conditions.size(), 4u);
  EXPECT_EQ(s.conditions[2].status, "True") << "the pod is not failed";
  EXPECT_EQ(s.conditions[3].type, "NetworkShaped");
  EXPECT_EQ(s.conditions[3].status, "False");
  EXPECT_EQ(s.conditions[3].reason, "InterfaceNotFound");
  EXPECT_NE(s.conditions[3].message.find("ns/worker-0: host network"), std::string::npos);
  ASSERT_EQ(s.applied.size(), 1u);
  EXPECT_EQ(s.applied[0].network, api::NetworkAllocation{});
  EXPECT_EQ(s.applied[0].cpu, pod.cpu);

  r.pods[0].network_skipped = Status();
  const StatusOr<ReconcileResult> found = r;
  in.result = &found;
  in.now = "2025-01-01T00:01:00Z";
  s = BuildStatus(in, s);
  EXPECT_EQ(s.conditions[3].status, "True");
  EXPECT_EQ(s.conditions[3].last_transition_time, "2025-01-01T00:01:00Z");
  EXPECT_EQ(s.applied[0].network, pod.network);
}

}  // namespace
}  // namespace star::agent
