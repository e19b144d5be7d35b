#include "star/shim/gradient_engine.h"

#include <gtest/gtest.h>

#include "engine/engine_test_support.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "star/shim/local_collective.h"
#include "star/shim/sync_engine.h"

namespace star::shim {
namespace {

using std::chrono::milliseconds;
using testing_support::ExpectAllOk;
using testing_support::MakeDecision;
using testing_support::RunRanks;
using Problem = testing_support::LeastSquaresProblem;

constexpr size_t kDim = Problem::kDim;

// A framework's optimizer outside the engine: SGD with momentum on the state's first
// kDim entries (the parameters); Reset() as after a switch.
struct Sgd {
  float lr = 0.1f, momentum = 0.0f;
  std::vector<float> v = std::vector<float>(kDim, 0.0f);
  void Step(std::vector<float>& state, const std::vector<float>& g) {
    for (size_t i = 0; i < kDim; ++i) {
      v[i] = momentum * v[i] + g[i];
      state[i] -= lr * v[i];
    }
  }
  void Reset() { std::fill(v.begin(), v.end(), 0.0f); }
};

// Mean gradient of the problem over [begin, begin + count).
std::vector<float> MeanGrad(const Problem& p, const std::vector<float>& state, size_t begin, size_t count) {
  std::vector<float> g = p.GradSum(std::span<const float>(state.data(), kDim), begin, count);
  for (float& x : g) x /= static_cast<float>(count);
  return g;
}

// SSGD with per-worker batches: the framework's SGD on the exchanged gradient gives what
// SyncEngine (which applies SGD itself) gives, on every worker.
TEST(GradientEngine, SsgdWithTheFrameworksOptimizerMatchesSyncEngine) {
  const std::vector<int64_t> batches = {3, 5, 8};
  const int n = 3, steps = 10;
  const Problem problem(16 * steps);
  std::vector<std::vector<float>> ours(n), theirs(n);
  auto offset = [&](int r) {
    int64_t o = 0;
    for (int q = 0; q < r; ++q) o += batches[static_cast<size_t>(q)];
    return static_cast<size_t>(o);
  };
  ExpectAllOk(RunRanks(n, milliseconds(10000), [&](int r, std::unique_ptr<Collective> world) -> Status {
    std::vector<float> state(kDim, 0.0f);
    STAR_ASSIGN_OR_RETURN(auto engine, GradientEngine::Create(std::move(world), state, kDim));
    Sgd sgd{.lr = 0.05f, .momentum = 0.9f};
    const size_t b = static_cast<size_t>(batches[static_cast<size_t>(r)]);
    for (int s = 0; s < steps; ++s) {
      STAR_RETURN_IF_ERROR(engine->BeginIteration(state).status());
      std::vector<float> g = MeanGrad(problem, state, static_cast<size_t>(s) * 16 + offset(r), b);
      STAR_ASSIGN_OR_RETURN(StepStats stats, engine->Exchange(g, static_cast<int64_t>(b), g));
      if (stats.update_batch != 16) return Status::Internal("update_batch " + std::to_string(stats.update_batch));
      sgd.Step(state, g);
    }
    ours[static_cast<size_t>(r)] = state;
    return engine->Finish(state);
  }));
  ExpectAllOk(RunRanks(n, milliseconds(10000), [&](int r, std::unique_ptr<Collective> world) -> Status {
    STAR_ASSIGN_OR_RETURN(auto engine, SyncEngine::Create(std::move(world), std::vector<float>(kDim, 0.0f),
                                                          SgdOptions{.lr = 0.05f, .momentum = 0.9f}));
    const size_t b = static_cast<size_t>(batches[static_cast<size_t>(r)]);
    for (int s = 0; s < steps; ++s) {
      auto g = problem.GradSum(engine->params(), static_cast<size_t>(s) * 16 + offset(r), b);
      STAR_RETURN_IF_ERROR(engine->Step(g, static_cast<int64_t>(b)).status());
    }
    theirs[static_cast<size_t>(r)].assign(engine->params().begin(), engine->params().end());
    return Status::Ok();
  }));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < kDim; ++i) {
      EXPECT_NEAR(ours[static_cast<size_t>(r)][i], theirs[0][i], 1e-5) << "rank " << r << " index " << i;
    }
  }
}

// ssgd -> fixed_k -> groups -> ssgd, with momentum reset at each switch and a buffer
// (state beyond the gradient) that differs per rank: every worker ends at iteration 16
// with the same state, the buffer averaged when leaving groups, and training made
// progress.
TEST(GradientEngine, SwitchesKeepTheStateConsistent) {
  for (int n : {1, 3, 5}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const Problem problem(256);
    std::vector<std::vector<float>> finals(static_cast<size_t>(n));
    std::vector<int64_t> iterations(static_cast<size_t>(n));
    std::vector<std::vector<int>> halves(n > 1 ? 2 : 1);
    for (int r = 0; r < n; ++r) halves[static_cast<size_t>(n > 1 && r >= n / 2 ? 1 : 0)].push_back(r);
    std::vector<int> reversed;
    for (int r = n - 1; r >= 0; --r) reversed.push_back(r);
    ExpectAllOk(RunRanks(n, milliseconds(10000), [&](int r, std::unique_ptr<Collective> world) -> Status {
      std::vector<float> state(kDim + 1, 0.0f);
      STAR_ASSIGN_OR_RETURN(auto engine, GradientEngine::Create(std::move(world), state, kDim));
      STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(1, 3, api::SyncMode::kFixedK, std::max(1, n / 2), {reversed})));
      STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(2, 8, api::SyncMode::kGroups, 1, halves)));
      STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(3, 12, api::SyncMode::kSsgd, n)));
      Sgd sgd{.lr = 0.1f, .momentum = 0.5f};
      std::mt19937 rng(static_cast<unsigned>(r));
      for (int s = 0; engine->iteration() < 16 && s < 64; ++s) {
        // Without state_needed() the state is not gathered: a scratch buffer must do.
        const bool needed = engine->state_needed();
        std::vector<float> scratch(state.size(), -99.0f);
        STAR_ASSIGN_OR_RETURN(BeginStats begin, engine->BeginIteration(needed ? state : scratch));
        if (scratch != std::vector<float>(state.size(), -99.0f)) return Status::Internal("scratch written");
        if (begin.switched) sgd.Reset();
        if (engine->iteration() >= 16) break;
        if (engine->mode() == api::SyncMode::kGroups) {
          state[kDim] = static_cast<float>(r);  // a running statistic of this worker's own
        }
        const size_t at = std::uniform_int_distribution<size_t>(0, 250)(rng);
        std::vector<float> g = MeanGrad(problem, state, at, 4);
        STAR_RETURN_IF_ERROR(engine->Exchange(g, 4, g).status());
        sgd.Step(state, g);
      }
      iterations[static_cast<size_t>(r)] = engine->iteration();
      if (engine->mode() != api::SyncMode::kSsgd) return Status::Internal("not back in ssgd");
      finals[static_cast<size_t>(r)] = state;
      return engine->Finish(state);
    }));
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(iterations[static_cast<size_t>(r)], 16) << "rank " << r;
      for (size_t i = 0; i < kDim; ++i) {
        EXPECT_NEAR(finals[static_cast<size_t>(r)][i], finals[0][i], 1e-6) << "rank " << r << " index " << i;
      }
      // Leaving groups averaged the buffer: (0 + 1 + ... + n-1) / n.
      EXPECT_NEAR(finals[static_cast<size_t>(r)][kDim], (n - 1) / 2.0, 1e-6) << "rank " << r;
    }
    EXPECT_LT(problem.Loss(std::span<const float>(finals[0].data(), kDim)), problem.Loss(std::vector<float>(kDim, 0.0f)));
  }
}

// A run that ends while in fixed_k: every worker stops after the same number of rounds
// (children skip ahead), and Finish releases every worker: none fails or hangs.
TEST(GradientEngine, FinishInFixedKReleasesEveryWorker) {
  for (int n : {2, 4, 5}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const Problem problem(64);
    ExpectAllOk(RunRanks(n, milliseconds(5000), [&](int r, std::unique_ptr<Collective> world) -> Status {
      std::vector<float> state(kDim, 0.0f);
      STAR_ASSIGN_OR_RETURN(auto engine, GradientEngine::Create(std::move(world), state, kDim));
      STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(1, 2, api::SyncMode::kFixedK, 1)));
      Sgd sgd;
      for (int s = 0; s < 40 && engine->iteration() < 12; ++s) {
        STAR_ASSIGN_OR_RETURN(BeginStats begin, engine->BeginIteration(state));
        if (begin.switched) sgd.Reset();
        std::vector<float> g = MeanGrad(problem, state, static_cast<size_t>(r) * 8, 8);
        STAR_RETURN_IF_ERROR(engine->Exchange(g, 8, g).status());
        sgd.Step(state, g);
      }
      return engine->Finish(state);
    }));
  }
}

TEST(GradientEngine, RejectsBadSizesAndBatches) {
  ExpectAllOk(RunRanks(1, milliseconds(1000), [&](int, std::unique_ptr<Collective> world) -> Status {
    std::vector<float> state(4, 0.0f);
    if (GradientEngine::Create(std::move(NewLocalGroup(1, milliseconds(1000))[0]), state, 5).status().code() !=
        StatusCode::kInvalidArgument) {
      return Status::Internal("grad_size > state size accepted");
    }
    STAR_ASSIGN_OR_RETURN(auto engine, GradientEngine::Create(std::move(world), state, 3));
    std::vector<float> g(3, 1.0f), small(2, 0.0f);
    if (engine->Exchange(small, 1, small).status().code() != StatusCode::kInvalidArgument) {
      return Status::Internal("wrong gradient size accepted");
    }
    if (engine->Exchange(g, 0, g).status().code() != StatusCode::kInvalidArgument) {
      return Status::Internal("batch 0 accepted");
    }
    if (engine->BeginIteration(small).status().code() != StatusCode::kInvalidArgument) {
      return Status::Internal("wrong state size accepted");
    }
    STAR_ASSIGN_OR_RETURN(StepStats stats, engine->Exchange(g, 2, g));
    if (g[0] != 1.0f || stats.update_batch != 2) return Status::Internal("mean of one worker changed");
    return Status::Ok();
  }));
}

}  // namespace
}  // namespace star::shim
