#include "star/shim/sync_engine.h"

#include <gtest/gtest.h>

#include "engine/engine_test_support.h"

#include <cmath>
#include <condition_variable>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "star/shim/local_collective.h"

namespace star::shim {
namespace {

using std::chrono::milliseconds;

using testing_support::ExpectAllOk;
using testing_support::MakeDecision;
using testing_support::RunRanks;

using Problem = testing_support::LeastSquaresProblem;

std::vector<float> Zeros(size_t n) { return std::vector<float>(n, 0.0f); }

void ExpectNear(std::span<const float> a, std::span<const float> b, double rel) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], rel * std::max(1.0, std::fabs(static_cast<double>(b[i])))) << "index " << i;
  }
}

// Trains with SSGD where worker r's batch at each step is batches[r] consecutive samples;
// returns every worker's final parameters.
std::vector<std::vector<float>> TrainSsgd(const Problem& problem, const std::vector<int64_t>& batches,
                                          int steps, SgdOptions sgd) {
  const int n = static_cast<int>(batches.size());
  int64_t global = 0;
  for (int64_t b : batches) global += b;
  std::vector<std::vector<float>> finals(static_cast<size_t>(n));
  ExpectAllOk(RunRanks(n, milliseconds(10000), [&](int r, std::unique_ptr<Collective> world) -> Status {
    STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), Zeros(Problem::kDim), sgd));
    int64_t offset = 0;
    for (int q = 0; q < r; ++q) offset += batches[static_cast<size_t>(q)];
    for (int s = 0; s < steps; ++s) {
      const size_t begin = static_cast<size_t>(s * global + offset);
      auto g = problem.GradSum(engine->params(), begin, static_cast<size_t>(batches[static_cast<size_t>(r)]));
      STAR_ASSIGN_OR_RETURN(StepStats stats, engine->Step(g, batches[static_cast<size_t>(r)]));
      if (stats.update_batch != global) return Status::Internal("update_batch " + std::to_string(stats.update_batch));
    }
    finals[static_cast<size_t>(r)].assign(engine->params().begin(), engine->params().end());
    return Status::Ok();
  }));
  return finals;
}

TEST(SyncEngineSsgd, NWorkersOfBatchBEqualOneWorkerOfBatchNB) {
  const int steps = 8;
  const int64_t b = 4;
  const Problem problem(static_cast<size_t>(steps * 8 * b));
  const SgdOptions sgd{.lr = 0.1f, .momentum = 0.0f, .weight_decay = 0.0f};
  for (int n : {1, 2, 3, 4, 8}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto many = TrainSsgd(problem, std::vector<int64_t>(static_cast<size_t>(n), b), steps, sgd);
    auto one = TrainSsgd(problem, {n * b}, steps, sgd);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(many[static_cast<size_t>(r)], many[0]);
      ExpectNear(many[static_cast<size_t>(r)], one[0], 1e-5);
    }
  }
}

TEST(SyncEngineSsgd, UnequalBatchesGiveTheGlobalBatchGradient) {
  const int steps = 10;
  const Problem problem(16 * steps);
  const SgdOptions sgd{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f};
  auto uneven = TrainSsgd(problem, {3, 5, 8}, steps, sgd);
  auto one = TrainSsgd(problem, {16}, steps, sgd);
  for (const auto& p : uneven) ExpectNear(p, one[0], 1e-5);
  EXPECT_LT(problem.Loss(one[0]), problem.Loss(Zeros(Problem::kDim)));
}

// Every worker r contributes, at its s-th Step, the one-hot gradient e_(r*T+s) with batch
// 1. Rank `observer` (a ring member throughout) recovers the gradient summed into every
// update from its parameter change times the update's batch (lr = 1), so the counts
// reveal the multiset of applied gradients.
// With slow_ring, ring members take 1 ms of simulated compute per step, so children's
// gradients also arrive during rounds (not only at the switch); the asserts do not depend
// on timing.
// Runs n workers to iteration 16 under `decisions` (the last must be ssgd); `observer`
// must be a ring member in every fixed_k decision. Returns how many workers were a child
// in some Step.
int RunExactlyOnce(int n, const std::vector<api::Decision>& decisions, int observer, bool slow_ring) {
  const int target = 16;
  // A child's Step advances its iteration by >= 1, except a Step that ends in a switch.
  const int slots = target + static_cast<int>(decisions.size());
  const size_t p = static_cast<size_t>(n * slots);
  std::vector<int> steps_taken(static_cast<size_t>(n), 0);
  std::vector<double> counts(p, 0.0);
  std::vector<std::vector<float>> finals(static_cast<size_t>(n));
  std::vector<int> was_child(static_cast<size_t>(n), 0);  // not vector<bool>: one per thread
  // (iteration, params) after each Step, per rank.
  std::vector<std::map<int64_t, std::vector<float>>> history(static_cast<size_t>(n));
  ExpectAllOk(RunRanks(n, milliseconds(10000), [&](int r, std::unique_ptr<Collective> world) -> Status {
    STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), Zeros(p), SgdOptions{.lr = 1.0f}));
    for (const api::Decision& d : decisions) STAR_RETURN_IF_ERROR(engine->Schedule(d));
    int& s = steps_taken[static_cast<size_t>(r)];
    for (; engine->iteration() < target && s < slots; ++s) {
      std::vector<float> g(p, 0.0f);
      g[static_cast<size_t>(r * slots + s)] = 1.0f;
      std::vector<float> before(engine->params().begin(), engine->params().end());
      if (slow_ring && engine->mode() == api::SyncMode::kFixedK && !engine->is_child()) {
        std::this_thread::sleep_for(milliseconds(1));  // simulated compute, not synchronisation
      }
      STAR_ASSIGN_OR_RETURN(StepStats stats, engine->Step(g, 1));
      if (!stats.updated) was_child[static_cast<size_t>(r)] = 1;  // a child's Step
      history[static_cast<size_t>(r)][engine->iteration()].assign(engine->params().begin(), engine->params().end());
      if (r == observer) {
        if (!stats.updated) return Status::Internal("observer did not update");
        for (size_t i = 0; i < p; ++i) {
          counts[i] += std::round((before[i] - engine->params()[i]) * static_cast<double>(stats.update_batch));
        }
      }
    }
    finals[static_cast<size_t>(r)].assign(engine->params().begin(), engine->params().end());
    if (engine->mode() != api::SyncMode::kSsgd) return Status::Internal("not back in ssgd");
    return Status::Ok();
  }));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(finals[static_cast<size_t>(r)], finals[static_cast<size_t>(observer)]) << "rank " << r;
    for (int s = 0; s < slots; ++s) {
      const double want = s < steps_taken[static_cast<size_t>(r)] ? 1.0 : 0.0;
      EXPECT_EQ(counts[static_cast<size_t>(r * slots + s)], want) << "rank " << r << " step " << s;
    }
    // A worker's parameters after any Step equal the observer's at the same iteration:
    // children get the ring's parameters back.
    for (const auto& [it, params] : history[static_cast<size_t>(r)]) {
      auto o = history[static_cast<size_t>(observer)].find(it);
      if (o == history[static_cast<size_t>(observer)].end()) {
        ADD_FAILURE() << "observer never reached iteration " << it << " of rank " << r;
        continue;
      }
      EXPECT_EQ(params, o->second) << "rank " << r << " iteration " << it;
    }
  }
  int children = 0;
  for (int c : was_child) children += c;
  return children;
}

void RunFixedKExactlyOnce(int n, int k, bool reversed, bool slow_ring = false) {
  SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) + (reversed ? " reversed" : "") +
               (slow_ring ? " slow ring" : ""));
  std::vector<int> order(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) order[static_cast<size_t>(r)] = reversed ? n - 1 - r : r;
  const int children = RunExactlyOnce(n,
                                      {MakeDecision(1, 2, api::SyncMode::kFixedK, k, {order}),
                                       MakeDecision(2, 11, api::SyncMode::kSsgd, n)},
                                      order[0], slow_ring);
  EXPECT_EQ(children, n - k);
}

TEST(SyncEngineFixedK, EveryGradientAppliedExactlyOnce) {
  RunFixedKExactlyOnce(2, 1, false);
  RunFixedKExactlyOnce(3, 2, true);
  RunFixedKExactlyOnce(4, 1, true);
  RunFixedKExactlyOnce(5, 2, false);
  RunFixedKExactlyOnce(8, 3, true);
  RunFixedKExactlyOnce(8, 7, false);
}

TEST(SyncEngineFixedK, EveryGradientAppliedExactlyOnceWhenChildrenKeepUp) {
  RunFixedKExactlyOnce(3, 1, false, true);
  RunFixedKExactlyOnce(5, 2, true, true);
  RunFixedKExactlyOnce(8, 3, false, true);
}

// The ring changes: rank 1 goes from parent (of 3) to child (of 0); rank 3 from child to
// ring member; then back to SSGD.
TEST(SyncEngineFixedK, ReRingingKeepsEveryGradientExactlyOnce) {
  for (bool slow : {false, true}) {
    SCOPED_TRACE(slow ? "slow ring" : "fast ring");
    const int children = RunExactlyOnce(
        5,
        {MakeDecision(1, 2, api::SyncMode::kFixedK, 2, {{0, 1}, {2, 3, 4}}),
         MakeDecision(2, 7, api::SyncMode::kFixedK, 2, {{0, 3}, {1, 2, 4}}),
         MakeDecision(3, 12, api::SyncMode::kSsgd, 5)},
        0, slow);
    EXPECT_GE(children, 3);
  }
}

TEST(SyncEngineFixedK, KEqualToNIsSsgdOverTheRing) {
  RunFixedKExactlyOnce(3, 3, false);
}

// A run that ends while in fixed_k (a trainer's iteration budget): the ring stops at the
// budget with children's gradients still in flight. Finish answers them, so every worker
// ends without error at the budget with the ring's parameters.
TEST(SyncEngineFixedK, FinishReleasesChildrenStillWaiting) {
  for (int n : {2, 3, 5}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const Problem problem(64);
    std::vector<std::vector<float>> finals(static_cast<size_t>(n));
    std::vector<int64_t> last(static_cast<size_t>(n), -1);
    ExpectAllOk(RunRanks(n, milliseconds(5000), [&](int r, std::unique_ptr<Collective> world) -> Status {
      STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), Zeros(Problem::kDim),
                                                            SgdOptions{.lr = 0.05f}));
      STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(1, 2, api::SyncMode::kFixedK, 1)));
      for (int s = 0; s < 40 && engine->iteration() < 12; ++s) {
        auto g = problem.GradSum(engine->params(), static_cast<size_t>(r) * 8, 8);
        STAR_RETURN_IF_ERROR(engine->Step(g, 8).status());
      }
      STAR_RETURN_IF_ERROR(engine->Finish());
      STAR_RETURN_IF_ERROR(engine->Finish());  // idempotent
      finals[static_cast<size_t>(r)].assign(engine->params().begin(), engine->params().end());
      last[static_cast<size_t>(r)] = engine->iteration();
      return Status::Ok();
    }));
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(last[static_cast<size_t>(r)], 12) << "rank " << r;
      EXPECT_EQ(finals[static_cast<size_t>(r)], finals[0]) << "rank " << r;
    }
  }
}

// Groups [[0,1],[2,3]]: each group's parameters equal those of a 2-worker SSGD run on the
// same data; after regrouping into SSGD every worker holds the same parameters.
TEST(SyncEngineGroups, GroupsEvolveIndependentlyAndConverge) {
  const int steps = 20;
  const Problem problem(4 * 4 * (steps + 5));
  const SgdOptions sgd{.lr = 0.4f};
  auto batch_begin = [](int r, int s) { return static_cast<size_t>((s * 4 + r) * 4); };
  std::vector<std::vector<float>> at_regroup(4), finals(4);
  // A group that reaches the return to ssgd first makes the other merge at its next
  // boundary: every worker waits here one step before it, so both groups run all
  // `steps` steps (the reference below is two groups of exactly that many).
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  ExpectAllOk(RunRanks(4, milliseconds(10000), [&](int r, std::unique_ptr<Collective> world) -> Status {
    STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), Zeros(Problem::kDim), sgd));
    STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(1, 0, api::SyncMode::kGroups, 2, {{0, 1}, {2, 3}})));
    STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(2, steps, api::SyncMode::kSsgd, 4)));
    for (int s = 0; s < steps + 3; ++s) {
      if (s == steps - 1) {
        std::unique_lock<std::mutex> lock(mu);
        ++arrived;
        cv.notify_all();
        if (!cv.wait_for(lock, milliseconds(10000), [&] { return arrived == 4; })) {
          return Status::DeadlineExceeded("the other group did not reach step " + std::to_string(s));
        }
      }
      if (s == steps) at_regroup[static_cast<size_t>(r)].assign(engine->params().begin(), engine->params().end());
      auto g = problem.GradSum(engine->params(), batch_begin(r, s), 4);
      STAR_ASSIGN_OR_RETURN(StepStats stats, engine->Step(g, 4));
      if (stats.update_batch != (s < steps ? 8 : 16)) return Status::Internal("wrong update batch");
    }
    finals[static_cast<size_t>(r)].assign(engine->params().begin(), engine->params().end());
    return Status::Ok();
  }));
  // Reference: ranks {0,1} (and {2,3}) alone, in SSGD.
  for (int first : {0, 2}) {
    std::vector<float> ref(Problem::kDim);
    ExpectAllOk(RunRanks(2, milliseconds(10000), [&](int r, std::unique_ptr<Collective> world) -> Status {
      STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), Zeros(Problem::kDim), sgd));
      for (int s = 0; s < steps; ++s) {
        auto g = problem.GradSum(engine->params(), batch_begin(first + r, s), 4);
        STAR_RETURN_IF_ERROR(engine->Step(g, 4).status());
      }
      if (r == 0) ref.assign(engine->params().begin(), engine->params().end());
      return Status::Ok();
    }));
    EXPECT_EQ(at_regroup[static_cast<size_t>(first)], at_regroup[static_cast<size_t>(first + 1)]);
    ExpectNear(at_regroup[static_cast<size_t>(first)], ref, 1e-6);
    EXPECT_LT(problem.Loss(ref), 0.1 * problem.Loss(Zeros(Problem::kDim)));
  }
  EXPECT_NE(at_regroup[0], at_regroup[2]);  // different data, independent copies
  for (int r = 1; r < 4; ++r) EXPECT_EQ(finals[static_cast<size_t>(r)], finals[0]);
  EXPECT_LT(problem.Loss(finals[0]), 0.1 * problem.Loss(Zeros(Problem::kDim)));
}

TEST(SyncEngineSwitch, SsgdFixedKGroupsSsgdCompletesConsistently) {
  for (int n : {1, 3, 5, 8}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const Problem problem(256);
    std::vector<std::vector<float>> finals(static_cast<size_t>(n));
    std::vector<int64_t> iterations(static_cast<size_t>(n));
    std::vector<std::vector<int>> halves(n > 1 ? 2 : 1);
    for (int r = 0; r < n; ++r) halves[static_cast<size_t>(n > 1 && r >= n / 2 ? 1 : 0)].push_back(r);
    std::vector<int> reversed;
    for (int r = n - 1; r >= 0; --r) reversed.push_back(r);
    ExpectAllOk(RunRanks(n, milliseconds(10000), [&](int r, std::unique_ptr<Collective> world) -> Status {
      STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), Zeros(Problem::kDim),
                                                            SgdOptions{.lr = 0.1f, .momentum = 0.5f}));
      STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(1, 3, api::SyncMode::kFixedK, std::max(1, n / 2), {reversed})));
      STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(2, 8, api::SyncMode::kGroups, 1, halves)));
      STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(3, 12, api::SyncMode::kSsgd, n)));
      std::mt19937 rng(static_cast<unsigned>(r));
      for (int s = 0; engine->iteration() < 16 && s < 64; ++s) {
        const size_t begin = std::uniform_int_distribution<size_t>(0, 250)(rng);
        auto g = problem.GradSum(engine->params(), begin, 4);
        STAR_RETURN_IF_ERROR(engine->Step(g, 4).status());
      }
      finals[static_cast<size_t>(r)].assign(engine->params().begin(), engine->params().end());
      iterations[static_cast<size_t>(r)] = engine->iteration();
      if (engine->mode() != api::SyncMode::kSsgd) return Status::Internal("not back in ssgd");
      return Status::Ok();
    }));
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(finals[static_cast<size_t>(r)], finals[0]) << "rank " << r;
      EXPECT_EQ(iterations[static_cast<size_t>(r)], 16) << "rank " << r;
    }
    EXPECT_LT(problem.Loss(finals[0]), problem.Loss(Zeros(Problem::kDim)));
  }
}

TEST(SyncEngineSwitch, ABatchOnlyDecisionKeepsMomentum) {
  // The same SSGD again (a decision that would only change batches or AMP) is no switch:
  // momentum is not reset, so training is exactly as without it.
  const Problem problem(256);
  const SgdOptions sgd{.lr = 0.1f, .momentum = 0.9f};
  auto train = [&](bool with_decision) {
    std::vector<float> final;
    ExpectAllOk(RunRanks(2, milliseconds(10000), [&](int r, std::unique_ptr<Collective> world) -> Status {
      STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), Zeros(Problem::kDim), sgd));
      if (with_decision) STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(1, 3, api::SyncMode::kSsgd, 2)));
      for (int s = 0; s < 6; ++s) {
        auto g = problem.GradSum(engine->params(), static_cast<size_t>((2 * s + r) * 4), 4);
        STAR_ASSIGN_OR_RETURN(StepStats stats, engine->Step(g, 4));
        if (stats.switch_seconds != 0) return Status::Internal("switched at step " + std::to_string(s));
      }
      if (r == 0) final.assign(engine->params().begin(), engine->params().end());
      return Status::Ok();
    }));
    return final;
  };
  EXPECT_EQ(train(true), train(false));
}

TEST(SyncEngineSwitch, ABatchOnlyDecisionDoesNotWaitForPeers) {
  // Groups {0} and {1}: rank 0 runs past a decision with the same groups before rank 1
  // takes its second step. As a switch it would wait for rank 1 at the check and time out.
  std::promise<void> rank0_done;
  std::shared_future<void> done = rank0_done.get_future().share();
  const auto statuses = RunRanks(2, milliseconds(2000), [&](int r, std::unique_ptr<Collective> world) -> Status {
    STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), Zeros(3), SgdOptions{},
                                                          EngineOptions{.timeout = milliseconds(2000)}));
    STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(1, 0, api::SyncMode::kGroups, 1, {{0}, {1}})));
    STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(2, 3, api::SyncMode::kGroups, 1, {{0}, {1}})));
    Status s;
    for (int step = 0; step < 8 && s.ok(); ++step) {
      if (r == 1 && step == 1) done.wait();
      s = engine->Step(std::vector<float>{1, 2, 3}, 1).status();
    }
    if (r == 0) rank0_done.set_value();
    if (s.ok() && engine->iteration() != 8) s = Status::Internal("iteration " + std::to_string(engine->iteration()));
    return s;
  });
  ExpectAllOk(statuses);
}

TEST(SyncEngineFixedK, ABatchOnlyDecisionLeavesChildrenInStep) {
  // A second fixed_k decision with the same k and ring: the parent takes it up without
  // a switch, and its child, which may skip past that iteration, forgets it.
  const std::vector<int> order{0, 1, 2, 3};
  const int children = RunExactlyOnce(4,
                                      {MakeDecision(1, 2, api::SyncMode::kFixedK, 2, {order}),
                                       MakeDecision(2, 6, api::SyncMode::kFixedK, 2, {order}),
                                       MakeDecision(3, 11, api::SyncMode::kSsgd, 4)},
                                      0, false);
  EXPECT_EQ(children, 2);
}

// Runs 4 workers for up to 12 steps with decisions from decide(rank); every worker must
// end with an error, within a bounded time (the communicator timeout is 2 s).
void ExpectEveryWorkerFails(const std::function<std::vector<api::Decision>(int)>& decide) {
  const int n = 4;
  const auto statuses = RunRanks(n, milliseconds(2000), [&](int r, std::unique_ptr<Collective> world) -> Status {
    STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), Zeros(3), SgdOptions{},
                                                          EngineOptions{.timeout = milliseconds(2000)}));
    for (const api::Decision& d : decide(r)) STAR_RETURN_IF_ERROR(engine->Schedule(d));
    for (int s = 0; s < 12; ++s) {
      STAR_RETURN_IF_ERROR(engine->Step(std::vector<float>{1, 2, 3}, 1).status());
    }
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(statuses[static_cast<size_t>(r)].ok()) << "rank " << r;
  }
}

TEST(SyncEngineSwitch, DifferentDecisionsFailOnEveryWorker) {
  ExpectEveryWorkerFails([](int r) {
    return std::vector<api::Decision>{MakeDecision(1, 3, api::SyncMode::kFixedK, r == 3 ? 2 : 3)};
  });
}

TEST(SyncEngineSwitch, AWorkerWithoutTheDecisionFailsEveryWorker) {
  ExpectEveryWorkerFails([](int r) {
    if (r == 2) return std::vector<api::Decision>{};
    return std::vector<api::Decision>{MakeDecision(1, 3, api::SyncMode::kGroups, 1, {{0, 1}, {2, 3}})};
  });
}

TEST(SyncEngineSwitch, AChildWithoutTheNextDecisionFailsEveryWorker) {
  // Ring {0, 1}; children 2 (of 0) and 3 (of 1); child 3 misses the switch back to SSGD.
  ExpectEveryWorkerFails([](int r) {
    std::vector<api::Decision> d{MakeDecision(1, 2, api::SyncMode::kFixedK, 2)};
    if (r != 3) d.push_back(MakeDecision(2, 6, api::SyncMode::kSsgd, 4));
    return d;
  });
}

TEST(SyncEngineSchedule, RejectsLateUnsupportedAndMalformedDecisions) {
  ExpectAllOk(RunRanks(2, milliseconds(5000), [&](int, std::unique_ptr<Collective> world) -> Status {
    STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), Zeros(2), SgdOptions{}));
    STAR_RETURN_IF_ERROR(engine->Step(std::vector<float>{1, 1}, 1).status());
    STAR_RETURN_IF_ERROR(engine->Step(std::vector<float>{1, 1}, 1).status());
    auto expect = [](Status s, StatusCode code) -> Status {
      if (s.code() != code) return Status::Internal("unexpected " + s.ToString());
      return Status::Ok();
    };
    STAR_RETURN_IF_ERROR(expect(engine->Schedule(MakeDecision(1, 1, api::SyncMode::kSsgd, 2)),
                                StatusCode::kFailedPrecondition));
    STAR_RETURN_IF_ERROR(expect(engine->Schedule(MakeDecision(1, 5, api::SyncMode::kAsgd, 1)),
                                StatusCode::kUnimplemented));
    STAR_RETURN_IF_ERROR(expect(engine->Schedule(MakeDecision(1, 5, api::SyncMode::kFixedK, 3)),
                                StatusCode::kInvalidArgument));
    STAR_RETURN_IF_ERROR(expect(engine->Schedule(MakeDecision(1, 5, api::SyncMode::kGroups, 1, {{0}})),
                                StatusCode::kInvalidArgument));
    STAR_RETURN_IF_ERROR(expect(engine->Schedule(MakeDecision(1, 5, api::SyncMode::kGroups, 1, {{0}, {2}})),
                                StatusCode::kInvalidArgument));
    STAR_RETURN_IF_ERROR(expect(engine->Step(std::vector<float>{1}, 1).status(), StatusCode::kInvalidArgument));
    STAR_RETURN_IF_ERROR(expect(engine->Step(std::vector<float>{1, 1}, 0).status(), StatusCode::kInvalidArgument));
    // Same decision twice is a no-op; a different one with the same epoch is rejected.
    STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(1, 5, api::SyncMode::kFixedK, 1)));
    STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(1, 5, api::SyncMode::kFixedK, 1)));
    STAR_RETURN_IF_ERROR(expect(engine->Schedule(MakeDecision(1, 5, api::SyncMode::kFixedK, 2)),
                                StatusCode::kInvalidArgument));
    return Status::Ok();
  }));
}

// A decision past the iteration the engine's messages carry is refused, not held forever.
TEST(SyncEngineSchedule, RejectsAnApplyIterationPastTheLargest) {
  ExpectAllOk(RunRanks(2, milliseconds(5000), [&](int, std::unique_ptr<Collective> world) -> Status {
    STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), Zeros(2), SgdOptions{}));
    for (const int64_t at : {(int64_t{1} << 40) + 1, std::numeric_limits<int64_t>::max()}) {
      const Status s = engine->Schedule(MakeDecision(1, at, api::SyncMode::kSsgd, 2));
      if (s.code() != StatusCode::kInvalidArgument || s.message().find("apply_at_iteration") == std::string::npos) {
        return Status::Internal("unexpected " + s.ToString());
      }
    }
    return engine->Step(std::vector<float>{1, 1}, 1).status();
  }));
}

TEST(SyncEngineCreate, BroadcastsRankZerosParameters) {
  std::vector<std::vector<float>> got(3);
  ExpectAllOk(RunRanks(3, milliseconds(5000), [&](int r, std::unique_ptr<Collective> world) -> Status {
    STAR_ASSIGN_OR_RETURN(auto engine,
                          SyncEngine::Create(std::move(world), std::vector<float>{float(r), 7}, SgdOptions{}));
    got[static_cast<size_t>(r)].assign(engine->params().begin(), engine->params().end());
    return Status::Ok();
  }));
  for (const auto& g : got) EXPECT_EQ(g, (std::vector<float>{0, 7}));
}

}  // namespace
}  // namespace star::shim
