#include "star/core/resources/planner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include <gtest/gtest.h>

namespace star::resources {
namespace {

int64_t Get(const Resources& r, int k) { return k == 0 ? r.cpu_millicores : r.bandwidth_bps; }

Pod MakePod(std::string uid, std::string node, std::string job, Resources alloc,
            Resources request = {}, bool guaranteed = false, double t = 0) {
  Pod p;
  p.namespace_ = "ns";
  p.name = uid;
  p.uid = std::move(uid);
  p.node = std::move(node);
  p.job = std::move(job);
  p.allocation = alloc;
  p.request = request;
  p.guaranteed = guaranteed;
  p.iteration_seconds = t;
  return p;
}

Job MakeJob(std::string name, bool sync, double t_max, double s = 1, double progress = 0) {
  return Job{std::move(name), sync, t_max, s, s, progress};
}

struct Random {
  ClusterState state;
  ReallocationRequest request;
};

Random RandomCluster(std::mt19937_64& rng) {
  auto uni = [&](int64_t a, int64_t b) { return std::uniform_int_distribution<int64_t>(a, b)(rng); };
  auto real = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  Random r;
  ClusterState& s = r.state;
  int nodes = static_cast<int>(uni(1, 5)), jobs = static_cast<int>(uni(1, 5));
  for (int i = 0; i < nodes; ++i) {
    s.nodes.push_back({"n" + std::to_string(i), {uni(2000, 32000), uni(1'000'000'000, 10'000'000'000)}});
  }
  for (int j = 0; j < jobs; ++j) {
    s.jobs.push_back(MakeJob("j" + std::to_string(j), uni(0, 3) > 0, real(0.2, 2), real(0.1, 4),
                             uni(0, 4) == 0 ? 0 : real(0, 1)));
    s.jobs.back().bandwidth_sensitivity = real(0.1, 4);
  }
  std::vector<Resources> used(s.nodes.size());
  int pods = static_cast<int>(uni(1, 30));
  for (int i = 0; i < pods; ++i) {
    size_t n = static_cast<size_t>(uni(0, nodes - 1));
    int job = static_cast<int>(uni(-1, jobs - 1));
    Resources req{uni(0, 3000), uni(0, 2'000'000'000)};
    bool guaranteed = uni(0, 2) == 0;
    Resources alloc{uni(1, 6000), uni(1, 3'000'000'000)};
    if (guaranteed) alloc = {req.cpu_millicores + uni(0, 1500), req.bandwidth_bps + uni(0, 500'000'000)};
    alloc.cpu_millicores = std::max<int64_t>(1, alloc.cpu_millicores);
    alloc.bandwidth_bps = std::max<int64_t>(1, alloc.bandwidth_bps);
    Resources room{s.nodes[n].capacity.cpu_millicores - used[n].cpu_millicores,
                   s.nodes[n].capacity.bandwidth_bps - used[n].bandwidth_bps};
    alloc = {std::min(alloc.cpu_millicores, room.cpu_millicores),
             std::min(alloc.bandwidth_bps, room.bandwidth_bps)};
    if (alloc.cpu_millicores < std::max<int64_t>(1, guaranteed ? req.cpu_millicores : 1) ||
        alloc.bandwidth_bps < std::max<int64_t>(1, guaranteed ? req.bandwidth_bps : 1)) {
      continue;
    }
    used[n] = {used[n].cpu_millicores + alloc.cpu_millicores, used[n].bandwidth_bps + alloc.bandwidth_bps};
    std::string jname = job < 0 ? "" : s.jobs[static_cast<size_t>(job)].name;
    double t = job < 0 || uni(0, 4) == 0 ? 0 : s.jobs[static_cast<size_t>(job)].iteration_seconds * real(0.2, 1.1);
    s.pods.push_back(MakePod("p" + std::to_string(i), s.nodes[n].name, jname, alloc, req, guaranteed, t));
  }
  r.request.job = s.jobs[static_cast<size_t>(uni(0, jobs - 1))].name;
  for (const Pod& p : s.pods) {
    if (p.job == r.request.job && uni(0, 2) > 0) {
      r.request.demands.push_back({p.uid, {uni(0, 8000), uni(0, 4'000'000'000)}});
    }
  }
  r.request.sync_loss_seconds = real(0, 100);
  r.request.horizon_seconds = real(1, 100);
  return r;
}

// Independent of CheckGuarantees: reads only the NodeAllocation objects (plus the
// unmanaged pods, which are not listed) and the input.
void ExpectNoViolation(const ClusterState& s, const Plan& plan) {
  std::map<std::string, Resources> used;
  std::map<std::string, const Pod*> pods;
  size_t listed = 0;
  for (const Pod& p : s.pods) {
    pods[p.uid] = &p;
    if (p.job.empty()) {
      used[p.node].cpu_millicores += p.allocation.cpu_millicores;
      used[p.node].bandwidth_bps += p.allocation.bandwidth_bps;
    }
  }
  ASSERT_EQ(plan.allocations.size(), s.nodes.size());
  for (const api::NodeAllocation& a : plan.allocations) {
    for (const api::PodAllocation& pa : a.spec.pods) {
      ++listed;
      const Pod& p = *pods.at(pa.uid);
      EXPECT_EQ(p.node, a.name);
      EXPECT_EQ(pa.network.egress_bits_per_second, pa.network.ingress_bits_per_second);
      EXPECT_GE(pa.cpu.quota_millicores, 1) << pa.uid;  // 0 would mean unlimited
      EXPECT_GE(pa.network.egress_bits_per_second, 1) << pa.uid;
      if (p.guaranteed) {
        EXPECT_GE(pa.cpu.quota_millicores, p.request.cpu_millicores) << pa.uid;
        EXPECT_GE(pa.network.egress_bits_per_second, p.request.bandwidth_bps) << pa.uid;
      }
      used[a.name].cpu_millicores += pa.cpu.quota_millicores;
      used[a.name].bandwidth_bps += pa.network.egress_bits_per_second;
    }
  }
  EXPECT_EQ(listed, static_cast<size_t>(std::count_if(s.pods.begin(), s.pods.end(),
                                                      [](const Pod& p) { return !p.job.empty(); })));
  for (const Node& n : s.nodes) {
    EXPECT_LE(used[n.name].cpu_millicores, n.capacity.cpu_millicores) << n.name;
    EXPECT_LE(used[n.name].bandwidth_bps, n.capacity.bandwidth_bps) << n.name;
  }
}

TEST(PlanReallocation, RandomClustersNeverViolateGuaranteesOrOvercommit) {
  std::mt19937_64 rng(1234);
  const PlannerOptions options;
  int taken_somewhere = 0;
  for (int t = 0; t < 3000; ++t) {
    Random r = RandomCluster(rng);
    ASSERT_TRUE(Validate(r.state, r.request).ok()) << Validate(r.state, r.request);
    auto plan = PlanReallocation(r.state, r.request);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectNoViolation(r.state, *plan);
    EXPECT_TRUE(CheckGuarantees(r.state, *plan).ok()) << CheckGuarantees(r.state, *plan);

    std::map<std::string, const Job*> jobs;
    for (const Job& j : r.state.jobs) jobs[j.name] = &j;
    std::map<std::string, Resources> extra;
    for (const Demand& d : r.request.demands) extra[d.uid] = d.extra;
    for (int k = 0; k < 2; ++k) {
      int64_t granted = 0;
      std::map<std::string, int64_t> node_used, node_taken;
      for (size_t i = 0; i < r.state.pods.size(); ++i) {
        const Pod& p = r.state.pods[i];
        const PodChange& c = plan->pods[i];
        ASSERT_EQ(c.uid, p.uid);
        EXPECT_EQ(Get(c.after, k), Get(p.allocation, k) - Get(c.freed_idle, k) - Get(c.taken, k) +
                                       Get(c.granted, k));
        bool donor = !p.job.empty() && p.job != r.request.job;
        if (!donor) {
          EXPECT_EQ(Get(c.freed_idle, k) + Get(c.taken, k), 0) << p.uid;
        }
        // Never pushed below the floor (unless it started there: then untouched).
        int64_t floor = std::max(Get(options.min_allocation, k), p.guaranteed ? Get(p.request, k) : 0);
        if (donor) {
          EXPECT_GE(Get(c.after, k), std::min(floor, Get(p.allocation, k))) << p.uid;
        }
        EXPECT_LE(Get(c.granted, k), Get(extra[p.uid], k));
        granted += Get(c.granted, k);
        node_used[p.node] += Get(c.after, k);
        node_taken[p.node] += Get(c.taken, k);
      }
      EXPECT_EQ(granted, Get(plan->granted, k));
      EXPECT_EQ(Get(plan->granted, k),
                Get(plan->from_free, k) + Get(plan->freed_idle, k) + Get(plan->taken, k));
      // Free before costly: where anything was taken, the node's unallocated capacity
      // and every SSGD donor's idle share were used up first.
      for (const Node& n : r.state.nodes) {
        if (node_taken[n.name] == 0) continue;
        ++taken_somewhere;
        EXPECT_EQ(node_used[n.name], Get(n.capacity, k)) << n.name;
        for (size_t i = 0; i < r.state.pods.size(); ++i) {
          const Pod& p = r.state.pods[i];
          if (p.node != n.name || p.job.empty() || p.job == r.request.job) continue;
          const Job& j = *jobs.at(p.job);
          int64_t idle = 0;
          if (j.synchronous && p.iteration_seconds > 0 && p.iteration_seconds < j.iteration_seconds) {
            int64_t floor = std::max(Get(options.min_allocation, k), p.guaranteed ? Get(p.request, k) : 0);
            idle = static_cast<int64_t>(std::floor(static_cast<double>(Get(p.allocation, k)) *
                                                   (j.iteration_seconds - p.iteration_seconds) /
                                                   j.iteration_seconds));
            idle = std::clamp<int64_t>(idle, 0, std::max<int64_t>(0, Get(p.allocation, k) - floor));
          }
          EXPECT_EQ(Get(plan->pods[i].freed_idle, k), idle) << p.uid;
        }
      }
    }
    EXPECT_EQ(plan->switch_recommended,
              plan->satisfied && r.request.sync_loss_seconds > plan->imposed_slowdown_seconds);
  }
  EXPECT_GT(taken_somewhere, 100);  // the random clusters do exercise step 2
}

// One node, requester "J" with pod "want" (demand `extra` cpu), and donors.
ClusterState OneNode(int64_t cpu_capacity, std::vector<Pod> donors, std::vector<Job> jobs) {
  ClusterState s;
  s.nodes.push_back({"n0", {cpu_capacity, 100'000'000'000}});
  s.jobs = std::move(jobs);
  s.jobs.push_back(MakeJob("J", true, 1.0));
  s.pods = std::move(donors);
  s.pods.push_back(MakePod("want", "n0", "J", {1000, 1'000'000}));
  return s;
}

ReallocationRequest Want(int64_t cpu, double sync_loss = 100, double horizon = 10) {
  return ReallocationRequest{"J", {{"want", {cpu, 0}}}, sync_loss, horizon};
}

TEST(PlanReallocation, UsesUnallocatedCapacityThenIdleSharesBeforeTaking) {
  // Capacity 10000; allocated 1000 (want) + 4000 + 4000: 1000 unallocated.
  // SSGD job A: pod a0 at t = 0.5 of t_max 1 idles half its allocation (2000).
  ClusterState s = OneNode(10000,
                           {MakePod("a0", "n0", "A", {4000, 1'000'000}, {}, false, 0.5),
                            MakePod("b0", "n0", "B", {4000, 1'000'000})},
                           {MakeJob("A", true, 1.0), MakeJob("B", false, 1.0)});
  auto plan = PlanReallocation(s, Want(2500));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->from_free.cpu_millicores, 1000);
  EXPECT_EQ(plan->freed_idle.cpu_millicores, 1500);
  EXPECT_EQ(plan->taken.cpu_millicores, 0);
  EXPECT_EQ(plan->pods[0].after.cpu_millicores, 2500);
  EXPECT_EQ(plan->pods[1].after.cpu_millicores, 4000);
  EXPECT_EQ(plan->pods[2].after.cpu_millicores, 3500);
  EXPECT_EQ(plan->imposed_slowdown_seconds, 0);
  EXPECT_TRUE(plan->satisfied);
  EXPECT_TRUE(plan->switch_recommended);

  // Wanting 4000: free 1000 + idle 2000, then 1000 taken at a cost from A and B.
  plan = PlanReallocation(s, Want(4000));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->freed_idle.cpu_millicores, 2000);
  EXPECT_EQ(plan->taken.cpu_millicores, 1000);
  EXPECT_GT(plan->imposed_slowdown_seconds, 0);
}

TEST(PlanReallocation, TakingFollowsInverseSensitivity) {
  // Asynchronous donors (no idle share), S = 1, 2, 4: weights 1, 1/2, 1/4.
  ClusterState s = OneNode(31000,
                           {MakePod("a0", "n0", "A", {10000, 1'000'000}),
                            MakePod("b0", "n0", "B", {10000, 1'000'000}),
                            MakePod("c0", "n0", "C", {10000, 1'000'000})},
                           {MakeJob("A", false, 1.0, 1), MakeJob("B", false, 1.0, 2),
                            MakeJob("C", false, 1.0, 4)});
  auto plan = PlanReallocation(s, Want(3500));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->pods[0].taken.cpu_millicores, 2000);
  EXPECT_EQ(plan->pods[1].taken.cpu_millicores, 1000);
  EXPECT_EQ(plan->pods[2].taken.cpu_millicores, 500);
}

TEST(PlanReallocation, JobsFurtherAlongGiveLess) {
  ClusterState s = OneNode(21000,
                           {MakePod("a0", "n0", "A", {10000, 1'000'000}),
                            MakePod("b0", "n0", "B", {10000, 1'000'000})},
                           {MakeJob("A", false, 1.0, 1, 0.0), MakeJob("B", false, 1.0, 1, 1.0)});
  auto plan = PlanReallocation(s, Want(3000));  // weights 1 and 1/2
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->pods[0].taken.cpu_millicores, 2000);
  EXPECT_EQ(plan->pods[1].taken.cpu_millicores, 1000);
}

TEST(PlanReallocation, CappedDonorsLeaveTheRestToOthers) {
  // A is the least sensitive but can only give 900 above its guaranteed request.
  ClusterState s = OneNode(15000,
                           {MakePod("a0", "n0", "A", {1000, 1'000'000}, {100, 0}, true),
                            MakePod("b0", "n0", "B", {13000, 1'000'000})},
                           {MakeJob("A", false, 1.0, 0.1), MakeJob("B", false, 1.0, 1)});
  auto plan = PlanReallocation(s, Want(5000));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->pods[0].after.cpu_millicores, 100);
  EXPECT_EQ(plan->pods[1].taken.cpu_millicores, 4100);
  EXPECT_TRUE(plan->satisfied);
}

TEST(PlanReallocation, GuaranteedRequestsAndFloorLimitWhatCanBeTaken) {
  ClusterState s = OneNode(6000,
                           {MakePod("a0", "n0", "A", {3000, 1'000'000}, {2500, 0}, true),
                            MakePod("b0", "n0", "B", {2000, 1'000'000}, {1900, 0}, false)},
                           {MakeJob("A", false, 1.0), MakeJob("B", false, 1.0)});
  auto plan = PlanReallocation(s, Want(10000));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->pods[0].after.cpu_millicores, 2500);  // its request
  EXPECT_EQ(plan->pods[1].after.cpu_millicores, 100);   // the default floor
  EXPECT_EQ(plan->granted.cpu_millicores, 2400);
  EXPECT_EQ(plan->shortfall.cpu_millicores, 7600);
  EXPECT_FALSE(plan->satisfied);
  EXPECT_FALSE(plan->switch_recommended);
  EXPECT_TRUE(CheckGuarantees(s, *plan).ok());
}

TEST(PlanReallocation, NoSwitchWhenImposedSlowdownExceedsTheGain) {
  // Taking 1000 of B's 10000 (S = 2, synchronous) over 10 s imposes 10 * 2 * 0.1 = 2 s.
  ClusterState s = OneNode(11000, {MakePod("b0", "n0", "B", {10000, 1'000'000})},
                           {MakeJob("B", true, 1.0, 2)});
  auto stay = PlanReallocation(s, Want(1000, /*sync_loss=*/1.5));
  ASSERT_TRUE(stay.ok());
  EXPECT_NEAR(stay->imposed_slowdown_seconds, 2.0, 1e-12);
  EXPECT_TRUE(stay->satisfied);
  EXPECT_FALSE(stay->switch_recommended);
  auto go = PlanReallocation(s, Want(1000, /*sync_loss=*/2.5));
  ASSERT_TRUE(go.ok());
  EXPECT_TRUE(go->switch_recommended);
}

TEST(PlanReallocation, NodeAllocationsCarryQuotaWeightAndNetworkLimits) {
  ClusterState s = OneNode(3000, {}, {});
  auto plan = PlanReallocation(s, Want(2000));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->allocations.size(), 1u);
  EXPECT_EQ(plan->allocations[0].name, "n0");
  ASSERT_EQ(plan->allocations[0].spec.pods.size(), 1u);
  const api::PodAllocation& a = plan->allocations[0].spec.pods[0];
  EXPECT_EQ(a.uid, "want");
  EXPECT_EQ(a.namespace_, "ns");
  EXPECT_EQ(a.cpu.quota_millicores, 3000);
  EXPECT_EQ(a.cpu.weight, CpuWeight(3000));
  EXPECT_EQ(a.network.egress_bits_per_second, 1'000'000);
  EXPECT_EQ(CpuWeight(1000), 39);  // the kubelet's weight for one CPU
  EXPECT_EQ(CpuWeight(0), 1);
  EXPECT_EQ(CpuWeight(1'000'000), 10000);
}

TEST(Undo, RestoresOriginalAllocations) {
  std::mt19937_64 rng(77);
  for (int t = 0; t < 200; ++t) {
    Random r = RandomCluster(rng);
    auto plan = PlanReallocation(r.state, r.request);
    ASSERT_TRUE(plan.ok());
    Plan undo = Undo(*plan);
    ASSERT_EQ(undo.pods.size(), r.state.pods.size());
    for (size_t i = 0; i < r.state.pods.size(); ++i) {
      EXPECT_EQ(undo.pods[i].after, r.state.pods[i].allocation);
      EXPECT_EQ(undo.pods[i].before, plan->pods[i].after);
    }
    EXPECT_TRUE(CheckGuarantees(r.state, undo).ok());
    std::map<std::string, const Pod*> pods;
    for (const Pod& p : r.state.pods) pods[p.uid] = &p;
    for (const api::NodeAllocation& a : undo.allocations) {
      for (const api::PodAllocation& pa : a.spec.pods) {
        EXPECT_EQ(pa.cpu.quota_millicores, pods.at(pa.uid)->allocation.cpu_millicores);
        EXPECT_EQ(pa.network.egress_bits_per_second, pods.at(pa.uid)->allocation.bandwidth_bps);
      }
    }
    Plan ended = Undo(*plan, r.request.job);
    for (const PodChange& c : ended.pods) EXPECT_NE(c.job, r.request.job);
  }
}

TEST(Validate, RejectsInvalidClustersNamingTheField) {
  ClusterState good = OneNode(10000, {MakePod("a0", "n0", "A", {1000, 1000})}, {MakeJob("A", true, 1)});
  ASSERT_TRUE(Validate(good, Want(10)).ok());
  auto msg = [](const ClusterState& s) { return Validate(s).message(); };

  ClusterState s = good;
  s.nodes[0].capacity.cpu_millicores = -5;
  EXPECT_EQ(msg(s), "nodes[0].capacity.cpu_millicores: must be >= 0, got -5");
  s = good;
  s.pods[0].node = "n9";
  EXPECT_EQ(msg(s), "pods[0].node: unknown node \"n9\"");
  s = good;
  s.pods[1].uid = "a0";
  EXPECT_EQ(msg(s), "pods[1].uid: duplicate \"a0\"");
  s = good;
  s.pods[0].job = "nope";
  EXPECT_EQ(msg(s), "pods[0].job: unknown job \"nope\"");
  s = good;
  s.pods[0].allocation.cpu_millicores = 9500;
  EXPECT_EQ(msg(s), "nodes[0]: allocations exceed capacity (cpu 10500 > 10000)");
  s = good;
  s.pods[0].guaranteed = true;
  s.pods[0].request.cpu_millicores = 2000;
  EXPECT_EQ(msg(s), "pods[0].allocation.cpu_millicores: guaranteed pod must have at least its request (2000), got 1000");
  s = good;
  s.pods[0].allocation.bandwidth_bps = 0;
  EXPECT_EQ(msg(s), "pods[0].allocation.bandwidth_bps: must be >= 1, got 0");
  s = good;
  s.jobs[0].cpu_sensitivity = 0;
  EXPECT_EQ(msg(s), "jobs[0].cpu_sensitivity: must be > 0, got 0");
  s = good;
  s.jobs[0].progress = 1.5;
  EXPECT_EQ(msg(s), "jobs[0].progress: must be <= 1, got 1.5");
  s = good;
  s.jobs.push_back(MakeJob("A", true, 1));
  EXPECT_EQ(msg(s), "jobs[2].name: duplicate \"A\"");
}

TEST(Validate, RejectsInvalidRequestsAndOptions) {
  ClusterState s = OneNode(10000, {MakePod("a0", "n0", "A", {1000, 1000})}, {MakeJob("A", true, 1)});
  auto msg = [&](const ReallocationRequest& r) { return Validate(s, r).message(); };
  ReallocationRequest r = Want(10);
  r.job = "X";
  EXPECT_EQ(msg(r), "job: unknown job \"X\"");
  r = Want(10);
  r.demands.push_back({"a0", {1, 1}});
  EXPECT_EQ(msg(r), "demands[1].uid: pod \"a0\" belongs to job \"A\", not \"J\"");
  r = Want(10);
  r.demands.push_back({"want", {1, 1}});
  EXPECT_EQ(msg(r), "demands[1].uid: duplicate \"want\"");
  r = Want(-10);
  EXPECT_EQ(msg(r), "demands[0].extra.cpu_millicores: must be >= 0, got -10");
  r = Want(10, 1, 0);
  EXPECT_EQ(msg(r), "horizon_seconds: must be > 0, got 0");
  EXPECT_FALSE(PlanReallocation(s, r).ok());
  PlannerOptions o;
  o.min_allocation.cpu_millicores = 0;
  EXPECT_EQ(Validate(o).message(), "min_allocation.cpu_millicores: must be >= 1, got 0");
  EXPECT_EQ(PlanReallocation(s, Want(10), o).status().message(),
            "min_allocation.cpu_millicores: must be >= 1, got 0");
}

TEST(CheckGuarantees, DetectsGuaranteeOvercommitAndMissingPods) {
  ClusterState s = OneNode(10000, {MakePod("a0", "n0", "A", {3000, 1000}, {2000, 0}, true)},
                           {MakeJob("A", false, 1)});
  auto plan = PlanReallocation(s, Want(100));
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(CheckGuarantees(s, *plan).ok());
  Plan bad = *plan;
  bad.pods[0].after.cpu_millicores = 1999;
  EXPECT_EQ(CheckGuarantees(s, bad).code(), StatusCode::kFailedPrecondition);
  bad = *plan;
  bad.pods[1].after.cpu_millicores = 8000;
  EXPECT_EQ(CheckGuarantees(s, bad).message(), "node n0: cpu 11000 over capacity 10000");
  bad = *plan;
  bad.pods.pop_back();
  EXPECT_FALSE(CheckGuarantees(s, bad).ok());
}

}  // namespace
}  // namespace star::resources
