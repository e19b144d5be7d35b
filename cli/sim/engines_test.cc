// The sync-mode engines on their own, with a fixed setting and no control loop.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "sim/mode_engine.h"

namespace star::sim {
namespace {

// Four workers of 32 samples, 0.064 s compute, 0.05 s communication, no jitter; worker
// 1 keeps `slow_cpu` of its speed throughout.
struct Job {
  explicit Job(double slow_cpu, api::Architecture arch = api::Architecture::kAllReduce) {
    s.workers = 4;
    s.batch_per_worker = 32;
    s.noise_scale = 0;
    s.min_updates = 1e9;  // never reached
    s.compute_seconds_per_sample = 0.002;
    s.communication_seconds = 0.05;
    s.staleness_penalty = 0;
    s.asgd_cpu_overhead = 0;
    s.asgd_bandwidth_overhead = 0;
    if (slow_cpu < 1) s.episodes.push_back({.worker = 1, .start = 0, .end = {}, .cpu = slow_cpu, .bandwidth = {}, .delay = {}, .peer = {}});
    model = std::make_unique<WorkerModel>(s);
    state.scenario = &s;
    state.model = model.get();
    state.progress = &progress;
    state.architecture = arch;
    state.steps.assign(4, 0);
    state.iteration.assign(4, 0);
  }

  // Runs `setting` until every worker stopped at stop_at; returns every completion.
  std::vector<IterationDone> RunTo(const Setting& setting, int64_t stop_at) {
    auto engine = MakeEngine(state, setting, 0);
    std::vector<IterationDone> all, done;
    double last = 0;
    while (engine->Next(stop_at, &done)) {
      for (const auto& d : done) {
        EXPECT_GE(d.end, last) << "completions out of time order";
        last = d.end;
        all.push_back(d);
      }
      done.clear();
    }
    return all;
  }

  Scenario s;
  std::unique_ptr<WorkerModel> model;
  Progress progress{0, 1e9, 0};
  SimState state;
};

Setting Mode(api::SyncMode mode, int k, std::vector<std::vector<int>> groups = {}) {
  api::Decision d;
  d.mode = mode;
  d.k = k;
  d.groups = std::move(groups);
  return SettingOf(d, BaselineSetting(4, 32), 4);
}

// A ring all-reduce moves at its slowest link, and every member is in it until it ends:
// the shim measures the whole all-reduce as each member's communication, so a slow link
// does not single out its worker (only its group).
TEST(GroupsEngine, RingMembersReportTheRingsDurationAsCommunication) {
  Job job(1);
  job.s.episodes.push_back({.worker = 1, .start = 0, .end = {}, .cpu = {}, .bandwidth = 0.5, .delay = {}, .peer = {}});
  job.model = std::make_unique<WorkerModel>(job.s);
  job.state.model = job.model.get();
  auto done = job.RunTo(Mode(api::SyncMode::kGroups, 4, {{0, 1}, {2, 3}}), 5);
  ASSERT_EQ(done.size(), 20u);
  for (const auto& d : done) {
    const bool slow_ring = d.worker == 0 || d.worker == 1;
    EXPECT_NEAR(d.communication, slow_ring ? 0.1 : 0.05, 1e-12) << "worker " << d.worker;
    EXPECT_NEAR(d.wait, 0, 1e-12) << "equal compute: nobody waits";
  }
}

// A decision of batches only is no switch: each worker takes its new batch up when it
// begins the decision's iteration, the fast ones long before the slow one gets there.
TEST(GroupsEngine, HeldBatchesApplyAtEachWorkersOwnIteration) {
  Job job(0.25);
  job.state.changes.resize(4);
  for (int w : {0, 1}) job.state.changes[static_cast<size_t>(w)].push_back({.at = 3, .batch = 16, .amp = 0});
  auto done = job.RunTo(Mode(api::SyncMode::kGroups, 1, {{0}, {1}, {2}, {3}}), 8);
  ASSERT_EQ(done.size(), 32u);
  double fast_change = -1, slow_change = -1;
  for (const auto& d : done) {
    const bool changed = (d.worker == 0 || d.worker == 1) && d.iteration > 3;
    EXPECT_EQ(d.batch, changed ? 16 : 32) << "worker " << d.worker << " iteration " << d.iteration;
    if (d.iteration == 4 && d.worker == 0) fast_change = d.end;
    if (d.iteration == 4 && d.worker == 1) slow_change = d.end;
  }
  EXPECT_LT(fast_change, slow_change);
  EXPECT_EQ(job.state.batch, (std::vector<int64_t>{16, 16, 32, 32}));
  EXPECT_TRUE(job.state.changes[0].empty() && job.state.changes[1].empty());
}

TEST(SsgdEngine, EveryIterationWaitsForTheSlowestWorker) {
  Job job(0.5);
  auto done = job.RunTo(BaselineSetting(4, 32), 10);
  ASSERT_EQ(done.size(), 40u);
  EXPECT_EQ(job.progress.updates(), 10);
  EXPECT_NEAR(done.back().end, 10 * (0.128 + 0.05), 1e-9);
  for (const auto& d : done) {
    EXPECT_EQ(d.update_batch, 128);
    EXPECT_NEAR(d.compute + d.communication + d.wait, 0.178, 1e-9);
    if (d.worker == 1) {
      EXPECT_NEAR(d.wait, 0, 1e-12);
    }
  }
  EXPECT_EQ(job.state.iteration, (std::vector<int64_t>{10, 10, 10, 10}));
}

TEST(ParameterServerEngine, SsgdTakesAsLongAsTheAllReduce) {
  Job job(0.5, api::Architecture::kParameterServer);
  auto done = job.RunTo(BaselineSetting(4, 32), 10);
  ASSERT_EQ(done.size(), 40u);
  EXPECT_EQ(job.progress.updates(), 10);
  EXPECT_NEAR(done.back().end, 10 * (0.128 + 0.05), 1e-9);
}

TEST(GroupsEngine, GroupsUpdateIndependently) {
  Job job(0.5);
  auto done = job.RunTo(Mode(api::SyncMode::kGroups, 1, {{0, 2, 3}, {1}}), 10);
  ASSERT_EQ(done.size(), 40u);
  EXPECT_EQ(job.progress.updates(), 20);  // each group's 10
  for (const auto& d : done) EXPECT_EQ(d.update_batch, d.worker == 1 ? 32 : 96);
  EXPECT_NEAR(done.back().end, 10 * 0.178, 1e-9);  // the slow group finishes last
}

TEST(FixedKEngine, TheRingRunsAtItsOwnPaceAndLateChildGradientsAreKept) {
  Job job(0.25);  // worker 1: 0.256 s compute, a child of worker 0
  auto done = job.RunTo(Mode(api::SyncMode::kFixedK, 3, {{0, 2, 3, 1}}), 20);
  EXPECT_EQ(job.progress.updates(), 20);
  int child_iterations = 0;
  for (const auto& d : done) {
    if (d.worker == 1) {
      ++child_iterations;
      EXPECT_NEAR(d.compute, 0.256, 1e-12);
    } else {
      EXPECT_NEAR(d.compute + d.communication + d.wait, 0.114, 1e-9);  // not slowed
    }
  }
  // Every gradient the child computed completed (taken by a round or carried at the stop).
  EXPECT_EQ(child_iterations, job.state.steps[1]);
  EXPECT_GT(child_iterations, 3);
  // The child's iteration count follows the ring's.
  EXPECT_EQ(job.state.iteration, (std::vector<int64_t>{20, 20, 20, 20}));
}

TEST(ParameterServerEngine, AsgdAppliesEveryGradientAlone) {
  Job job(1.0, api::Architecture::kParameterServer);
  auto done = job.RunTo(Mode(api::SyncMode::kAsgd, 1), 10);
  ASSERT_EQ(done.size(), 40u);
  EXPECT_EQ(job.progress.updates(), 40);
  for (const auto& d : done) EXPECT_EQ(d.update_batch, 32);
}

TEST(ParameterServerEngine, FixedKFiresOnTheFirstKGradients) {
  Job job(0.25, api::Architecture::kParameterServer);
  auto done = job.RunTo(Mode(api::SyncMode::kFixedK, 3, {{0, 2, 3, 1}}), 20);
  int fast = 0, slow = 0;
  for (const auto& d : done) (d.worker == 1 ? slow : fast)++;
  EXPECT_EQ(fast, 60);
  EXPECT_EQ(slow, 20);
  // The fast workers did not wait for the slow one every round.
  EXPECT_GT(job.progress.updates(), 20);
}

}  // namespace
}  // namespace star::sim
