// GradientEngine::ExchangePart: the gradient exchanged in parts (as DDP's buckets arrive)
// equals the whole-gradient Exchange, in ssgd and in groups, with unequal batches.
#include "star/shim/gradient_engine.h"

#include <gtest/gtest.h>

#include "engine/engine_test_support.h"

#include <random>
#include <string>
#include <vector>

#include "star/shim/local_collective.h"

namespace star::shim {
namespace {

using std::chrono::milliseconds;
using testing_support::ExpectAllOk;
using testing_support::MakeDecision;
using testing_support::RunRanks;

constexpr size_t kGrad = 23;
const std::vector<size_t> kParts = {7, 1, 10, 5};

// Exchanges `g` in kParts's parts, in place; the last part's stats.
StatusOr<StepStats> ExchangeInParts(GradientEngine& engine, std::vector<float>& g, int64_t batch) {
  StepStats last;
  size_t at = 0;
  for (size_t i = 0; i < kParts.size(); ++i) {
    const bool is_last = i + 1 == kParts.size();
    const int64_t before = engine.iteration();
    STAR_ASSIGN_OR_RETURN(last, engine.ExchangePart(std::span<float>(g.data() + at, kParts[i]), batch, is_last));
    if (engine.iteration() != before + (is_last ? 1 : 0)) {
      return Status::Internal("iteration moved at part " + std::to_string(i));
    }
    at += kParts[i];
  }
  return last;
}

// Each iteration pair, every worker exchanges the same gradient whole then in parts: the
// results and the stats agree, in ssgd (iterations 0-1) and in groups (2-3).
TEST(GradientEngineParts, EqualTheWholeGradientExchangeInSsgdAndGroups) {
  const std::vector<int64_t> batches = {3, 5, 8, 2};
  const int n = 4;
  ExpectAllOk(RunRanks(n, milliseconds(10000), [&](int r, std::unique_ptr<Collective> world) -> Status {
    std::vector<float> state(kGrad + 2, 0.0f);
    STAR_ASSIGN_OR_RETURN(auto engine, GradientEngine::Create(std::move(world), state, kGrad));
    STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(1, 2, api::SyncMode::kGroups, 1, {{0, 2}, {1, 3}})));
    std::mt19937 rng(static_cast<unsigned>(r) + 1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t batch = batches[static_cast<size_t>(r)];
    for (int round = 0; round < 2; ++round) {
      std::vector<float> g(kGrad);
      for (float& x : g) x = u(rng);
      std::vector<float> whole(kGrad), parts = g;
      STAR_RETURN_IF_ERROR(engine->BeginIteration(state).status());
      if (!engine->parts_supported()) return Status::Internal("parts not supported");
      STAR_ASSIGN_OR_RETURN(StepStats a, engine->Exchange(g, batch, whole));
      STAR_RETURN_IF_ERROR(engine->BeginIteration(state).status());
      STAR_ASSIGN_OR_RETURN(StepStats b, ExchangeInParts(*engine, parts, batch));
      const std::string where = "rank " + std::to_string(r) + " round " + std::to_string(round);
      const int64_t total = round == 0 ? 18 : (r % 2 == 0 ? 11 : 7);  // world, then {0,2} / {1,3}
      EXPECT_EQ(a.update_batch, total) << where;
      EXPECT_TRUE(b.updated) << where;
      EXPECT_EQ(b.update_batch, a.update_batch) << where;
      EXPECT_EQ(b.contributions, a.contributions) << where;
      EXPECT_NEAR(b.update_grad_sq_norm, a.update_grad_sq_norm, 1e-6 * a.update_grad_sq_norm) << where;
      for (size_t i = 0; i < kGrad; ++i) EXPECT_FLOAT_EQ(parts[i], whole[i]) << where << " index " << i;
    }
    const api::SyncMode want = api::SyncMode::kGroups;
    if (engine->mode() != want) return Status::Internal("not in groups");
    return engine->Finish(state);
  }));
}

// Parts that overrun or fall short of the gradient, an empty part, batch 0, and parts in
// fixed_k are refused with the reason.
TEST(GradientEngineParts, RejectsBadPartsAndFixedK) {
  ExpectAllOk(RunRanks(2, milliseconds(5000), [&](int, std::unique_ptr<Collective> world) -> Status {
    std::vector<float> state(4, 0.0f), g(4, 1.0f), empty;
    STAR_ASSIGN_OR_RETURN(auto engine, GradientEngine::Create(std::move(world), state, 4));
    STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(1, 1, api::SyncMode::kFixedK, 1)));
    STAR_RETURN_IF_ERROR(engine->BeginIteration(state).status());
    const auto code = [&](std::span<float> part, int64_t batch, bool last) {
      return engine->ExchangePart(part, batch, last).status().code();
    };
    if (code(std::span<float>(g.data(), 3), 1, true) != StatusCode::kInvalidArgument) {
      return Status::Internal("parts short of the gradient accepted");
    }
    if (code(empty, 1, false) != StatusCode::kInvalidArgument) return Status::Internal("empty part accepted");
    if (code(g, 0, true) != StatusCode::kInvalidArgument) return Status::Internal("batch 0 accepted");
    STAR_RETURN_IF_ERROR(engine->ExchangePart(g, 1, true).status());
    if (g[0] != 1.0f) return Status::Internal("the mean of equal gradients changed");
    STAR_RETURN_IF_ERROR(engine->BeginIteration(state).status());
    if (engine->parts_supported()) return Status::Internal("fixed_k takes parts");
    if (code(g, 1, true) != StatusCode::kFailedPrecondition) return Status::Internal("parts accepted in fixed_k");
    return Status::Ok();
  }));
}

}  // namespace
}  // namespace star::shim
