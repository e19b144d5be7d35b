#include "star/operator/reconciler/reallocation.h"

#include <gtest/gtest.h>

namespace star::op {
namespace {

api::PodAllocation Alloc(const std::string& name, const std::string& uid, int64_t cpu, bool guaranteed = false) {
  api::PodAllocation p;
  p.namespace_ = "default";
  p.name = name;
  p.uid = uid;
  p.cpu.quota_millicores = cpu;
  p.guaranteed = guaranteed;
  return p;
}

// Job "default/j" (4 workers) has worker 0 (uid j0, 1000m) straggling 2x on node n1,
// next to "default/o"'s pod o0 (2000m, SSGD).
ReallocationInput TwoJobs(int64_t node_cpu, bool neighbor_guaranteed = false) {
  ReallocationInput in;
  in.job = "default/j";
  in.workers = 4;
  in.stragglers.push_back({"j0", "n1", 0, api::StragglerCause::kCompute, 2.0});
  api::NodeAllocation n1;
  n1.name = "n1";
  n1.spec.pods = {Alloc("j-worker-0", "j0", 1000), Alloc("o-worker-0", "o0", 2000, neighbor_guaranteed)};
  in.allocations = {n1};
  in.node_cpu["n1"] = node_cpu;
  in.owners["j0"] = {"default/j", 0};
  in.owners["o0"] = {"default/o", 0};
  in.loads["default/j"] = {false, {2.0, 1.0, 1.0, 1.0}, 0.2};
  in.loads["default/o"] = {true, {1.0}, 0.5};
  return in;
}

TEST(PlanJobReallocation, TakesFromTheNeighborWhenTheNodeIsFullAndRecordsBothPods) {
  auto out = PlanJobReallocation(TwoJobs(3000));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->apply) << out->message;
  ASSERT_EQ(out->overrides.size(), 2u);
  EXPECT_EQ(out->overrides["j0"].cpu_millicores, 2000);  // (2 - 1) x 1000m more
  EXPECT_EQ(out->overrides["j0"].job, "default/j");
  EXPECT_EQ(out->overrides["o0"].cpu_millicores, 1000);
  EXPECT_EQ(out->overrides["o0"].node, "n1");
  EXPECT_EQ(out->plan.taken.cpu_millicores, 1000);
  EXPECT_NE(out->message.find("worker 0"), std::string::npos) << out->message;
  EXPECT_NE(out->message.find("1000m taken"), std::string::npos) << out->message;
}

TEST(PlanJobReallocation, UsesFreeNodeCapacityFirstAndLeavesTheNeighborAlone) {
  auto out = PlanJobReallocation(TwoJobs(4000));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->apply) << out->message;
  ASSERT_EQ(out->overrides.size(), 1u);
  EXPECT_EQ(out->overrides.begin()->first, "j0");
  EXPECT_EQ(out->plan.from_free.cpu_millicores, 1000);
}

TEST(PlanJobReallocation, AGuaranteedNeighborIsNotThrottledAndThePlanIsSkipped) {
  auto out = PlanJobReallocation(TwoJobs(3000, /*neighbor_guaranteed=*/true));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FALSE(out->apply);
  EXPECT_TRUE(out->overrides.empty());
  EXPECT_NE(out->message.find("skipped"), std::string::npos) << out->message;
}

TEST(PlanJobReallocation, ANodeWhosePodsExceedItsAllocatableIsTakenAsFull) {
  // Limits overcommit the node (3000m on a 1000m node): no free capacity, no error.
  auto out = PlanJobReallocation(TwoJobs(1000));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->plan.from_free.cpu_millicores, 0);
}

TEST(PlanJobReallocation, AStragglerWithoutACpuLimitAsksForNothing) {
  ReallocationInput in = TwoJobs(3000);
  in.allocations[0].spec.pods[0].cpu.quota_millicores = 0;
  auto out = PlanJobReallocation(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FALSE(out->apply);
  EXPECT_NE(out->message.find("nothing to reallocate"), std::string::npos);
}

TEST(PlanJobReallocation, ACommunicationStragglerAsksForBandwidthOnlyWhenItHasALimit) {
  ReallocationInput in = TwoJobs(4000);
  in.stragglers[0].cause = api::StragglerCause::kCommunication;
  auto out = PlanJobReallocation(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FALSE(out->apply);
  EXPECT_NE(out->message.find("nothing to reallocate"), std::string::npos) << "unlimited bandwidth";

  for (auto& p : in.allocations[0].spec.pods) p.network.egress_bits_per_second = 100'000'000;
  out = PlanJobReallocation(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->plan.wanted.bandwidth_bps, 99'000'000)
      << "(2 - 1) x its 100 Mbit/s, as far as the neighbor's 100 Mbit/s goes above its 1 Mbit/s floor";
  EXPECT_EQ(out->plan.wanted.cpu_millicores, 0);
}

// On a shared NIC (slowdown - 1) x its own allocation can exceed what exists: it asks for
// what the co-located senders yield above their floors, and gets it.
TEST(PlanJobReallocation, ACommunicationStragglerAsksForNoMoreThanItsNeighborsCanYield) {
  ReallocationInput in = TwoJobs(4000);
  in.stragglers[0].cause = api::StragglerCause::kCommunication;
  in.stragglers[0].slowdown = 3.0;
  in.allocations[0].spec.pods[0].network.egress_bits_per_second = 1'000'000'000;
  in.allocations[0].spec.pods[1].network.egress_bits_per_second = 800'000'000;
  // Another worker of the same job on the node gives nothing to its own job.
  in.allocations[0].spec.pods.push_back(Alloc("j-worker-1", "j1", 1000));
  in.allocations[0].spec.pods.back().network.egress_bits_per_second = 500'000'000;
  in.owners["j1"] = {"default/j", 1};
  auto out = PlanJobReallocation(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->plan.wanted.bandwidth_bps, 799'000'000) << "800 Mbit/s above the 1 Mbit/s floor, not 2 Gbit/s";
  EXPECT_TRUE(out->apply) << out->message;
  ASSERT_TRUE(out->overrides.count("o0"));
  EXPECT_EQ(out->overrides.at("o0").bandwidth_bps, 1'000'000);
  EXPECT_EQ(out->overrides.at("j0").bandwidth_bps, 1'799'000'000);

  in.allocations[0].spec.pods[1].guaranteed = true;  // its whole allocation is its request
  out = PlanJobReallocation(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FALSE(out->apply);
  EXPECT_NE(out->message.find("nothing to reallocate"), std::string::npos) << out->message;
}

TEST(PlanJobReallocation, BadInputIsRefusedNamingTheField) {
  ReallocationInput in = TwoJobs(3000);
  in.stragglers[0].node = "";
  auto out = PlanJobReallocation(in);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("stragglers"), std::string::npos);
  in = TwoJobs(3000);
  in.horizon_seconds = 0;
  out = PlanJobReallocation(in);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("horizon_seconds"), std::string::npos);
}

// The plans kept on NodeAllocation n1: only its own pods' entries, read back as written.
TEST(ReallocationPlansAnnotation, KeepsOnlyTheNodesListedPodsAndRoundTrips) {
  JobPlans plans;
  plans["default/j"] = {{"a", {"n1", "default/j", 1500, 0}}, {"b", {"n2", "x/y", 300, 5000000}}};
  plans["x/y"] = {{"c", {"n1", "default/j", 200, 7}}, {"gone", {"n1", "z/w", 100, 0}}};
  const std::string value = PlansToAnnotation(plans, "n1", {"a", "c"});
  auto back = PlansFromAnnotation(value, "n1");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  JobPlans want;
  want["default/j"] = {{"a", {"n1", "default/j", 1500, 0}}};
  want["x/y"] = {{"c", {"n1", "default/j", 200, 7}}};
  EXPECT_EQ(*back, want);
  EXPECT_EQ(PlansToAnnotation(plans, "n3", {"a", "b", "c"}), "");
}

TEST(ReallocationPlansAnnotation, RefusesMalformedValuesNamingTheField) {
  for (const std::string bad : {"{", "[]", R"({"j":[]})", R"({"j":{"a":{"job":"j"}}})",
                                R"({"j":{"a":{"job":"j","cpu":-1,"bps":0}}})",
                                R"({"j":{"a":{"job":"j","cpu":10000001,"bps":0}}})"}) {
    auto r = PlansFromAnnotation(bad, "n1");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(kReallocationPlansAnnotation), std::string::npos) << r.status().message();
  }
}

TEST(FoldOverrides, APodsOwnJobWinsElseTheLowestAllocation) {
  std::map<std::string, std::map<std::string, PodOverride>> plans;
  plans["a/one"] = {{"p", {"n", "b/two", 800, 0}}, {"q", {"n", "c/three", 900, 0}}};
  plans["b/two"] = {{"p", {"n", "b/two", 2000, 0}}};
  plans["d/four"] = {{"q", {"n", "c/three", 600, 7}}};
  auto f = FoldOverrides(plans);
  EXPECT_EQ(f["p"].cpu_millicores, 2000);  // its own job's grant
  EXPECT_EQ(f["q"].cpu_millicores, 600);   // the lowest of the others'
  EXPECT_EQ(f["q"].bandwidth_bps, 7);
}

TEST(ApplyOverrides, ChangesOnlyTheNamedPods) {
  std::vector<api::PodAllocation> pods{Alloc("x", "1", 1000), Alloc("y", "2", 500), Alloc("z", "3", 500)};
  pods[2].network.ingress_bits_per_second = 50'000'000;
  auto out = ApplyOverrides(
      pods, {{"2", {"n", "j", 250, 1000000}}, {"3", {"n", "j", 250, 2000000}}, {"9", {"n", "j", 1, 1}}}, "n");
  EXPECT_EQ(out[0], pods[0]);
  EXPECT_EQ(out[1].cpu.quota_millicores, 250);
  EXPECT_EQ(out[1].network.egress_bits_per_second, 1000000);
  EXPECT_EQ(out[1].network.ingress_bits_per_second, 0) << "an unlimited ingress is not limited by the plan";
  EXPECT_EQ(out[2].network.egress_bits_per_second, 2000000);
  EXPECT_EQ(out[2].network.ingress_bits_per_second, 2000000) << "a limited ingress follows the plan";
}

// An override is for one node's pod: the same uid on another node is not touched.
TEST(ApplyOverrides, AnOverrideForAnotherNodeIsNotApplied) {
  std::vector<api::PodAllocation> pods{Alloc("x", "1", 1000)};
  auto out = ApplyOverrides(pods, {{"1", {"elsewhere", "j", 1, 1}}}, "n");
  EXPECT_EQ(out, pods);
}

}  // namespace
}  // namespace star::op
