#include "star/core/select/learned.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace star::select {
namespace {

using api::Architecture;
using api::SyncMode;

SelectionInput Input(Architecture arch, std::vector<double> t) {
  SelectionInput in;
  in.architecture = arch;
  in.batch_per_worker = 32;
  in.noise_scale = 1000;
  in.iteration_seconds = std::move(t);
  return in;
}

// A model that returns whatever it is told to.
class FixedModel : public LearnedSelector {
 public:
  explicit FixedModel(std::vector<float> scores) : scores_(std::move(scores)) {}
  StatusOr<std::vector<float>> Scores(const SelectorFeatures& features) override {
    last_ = features;
    return scores_;
  }
  std::vector<float> scores_;
  SelectorFeatures last_;
};

class FailingModel : public LearnedSelector {
 public:
  StatusOr<std::vector<float>> Scores(const SelectorFeatures&) override {
    return Status::Unavailable("model.json: gone");
  }
};

std::vector<float> OneHot(int c) {
  std::vector<float> s(kSelectorClassCount, 0.0f);
  s[c] = 1.0f;
  return s;
}

// Checks the invariants of a valid selection for `in` under `o`.
void ExpectValid(const Selection& s, const SelectionInput& in, const SelectOptions& o) {
  const int n = static_cast<int>(in.iteration_seconds.size());
  ASSERT_GE(s.k, 1);
  ASSERT_LE(s.k, n);
  std::set<int> ids;
  for (const auto& g : s.groups) {
    ASSERT_FALSE(g.empty());
    for (int id : g) ids.insert(id);
  }
  EXPECT_EQ(static_cast<int>(ids.size()), n);
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), n - 1);
  EXPECT_TRUE(std::isfinite(s.estimated_seconds_per_progress));
  EXPECT_GT(s.estimated_seconds_per_progress, 0);
  ASSERT_EQ(s.candidates.size(), 1u);
  EXPECT_EQ(s.candidates[0].mode, s.mode);
  switch (s.mode) {
    case SyncMode::kSsgd:
      EXPECT_EQ(s.k, n);
      break;
    case SyncMode::kFixedK:
      EXPECT_LT(s.k, n);
      EXPECT_GE(s.k, o.min_k);
      break;
    case SyncMode::kGroups:
      EXPECT_GT(s.groups.size(), 1u);
      for (const auto& g : s.groups) EXPECT_GE(static_cast<int>(g.size()), o.min_k);
      break;
    case SyncMode::kAsgd:
      EXPECT_TRUE(in.architecture == Architecture::kParameterServer ||
                  o.allow_asgd_with_allreduce);
      EXPECT_EQ(s.k, 1);
      EXPECT_LE(o.min_k, 1);
      break;
  }
}

TEST(FeaturesOf, MeasuresStragglingFromTimes) {
  SelectionInput in = Input(Architecture::kParameterServer, {1, 1, 1, 2});
  SelectOptions o;
  o.min_k = 2;
  auto f = FeaturesOf(in, SelectorContext{0.25}, o);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->workers, 4);
  EXPECT_EQ(f->parameter_server, 1);
  EXPECT_DOUBLE_EQ(f->straggling_degree, (2 - 1.25) / 1.25);
  EXPECT_DOUBLE_EQ(f->straggler_fraction, 0.25);
  EXPECT_DOUBLE_EQ(f->slowdown_p50, 1);
  EXPECT_DOUBLE_EQ(f->slowdown_p90, 2);
  EXPECT_DOUBLE_EQ(f->slowdown_max, 2);
  EXPECT_DOUBLE_EQ(f->communication_share, 0.25);
  EXPECT_DOUBLE_EQ(f->noise_per_global_batch, 1000.0 / 128);
  EXPECT_DOUBLE_EQ(f->noise_per_local_batch, 1000.0 / 32);
  EXPECT_DOUBLE_EQ(f->min_k_fraction, 0.5);
  const auto v = FeatureVector(*f);
  EXPECT_EQ(v.size(), kSelectorFeatureCount);
  EXPECT_FLOAT_EQ(v[0], 4);
  EXPECT_FLOAT_EQ(v[10], 0.5f);
}

TEST(FeaturesOf, RejectsBadInputNamingTheField) {
  auto bad_share = FeaturesOf(Input(Architecture::kAllReduce, {1, 2}), SelectorContext{1.5});
  ASSERT_FALSE(bad_share.ok());
  EXPECT_NE(bad_share.status().message().find("communication_share"), std::string::npos);
  auto bad_times = FeaturesOf(Input(Architecture::kAllReduce, {1, -2}), SelectorContext{});
  ASSERT_FALSE(bad_times.ok());
  EXPECT_NE(bad_times.status().message().find("iteration_seconds[1]"), std::string::npos);
}

TEST(ClassOf, MapsModesAndKToClasses) {
  EXPECT_EQ(ClassOf(SyncMode::kSsgd, 8, 8), kSelectorClassSsgd);
  EXPECT_EQ(ClassOf(SyncMode::kFixedK, 8, 8), kSelectorClassSsgd);
  EXPECT_EQ(ClassOf(SyncMode::kAsgd, 1, 8), kSelectorClassAsgd);
  EXPECT_EQ(ClassOf(SyncMode::kGroups, 8, 8), kSelectorClassGroups);
  EXPECT_EQ(ClassOf(SyncMode::kFixedK, 2, 8), kSelectorClassFixedKFirst + 0);
  EXPECT_EQ(ClassOf(SyncMode::kFixedK, 4, 8), kSelectorClassFixedKFirst + 1);
  EXPECT_EQ(ClassOf(SyncMode::kFixedK, 6, 8), kSelectorClassFixedKFirst + 2);
  EXPECT_EQ(ClassOf(SyncMode::kFixedK, 90, 100), kSelectorClassFixedKFirst + 3);
}

TEST(SelectLearned, FollowsTheBestAllowedClass) {
  SelectionInput in = Input(Architecture::kAllReduce, {1, 1, 1, 1, 1, 1, 1, 3});
  FixedModel half(OneHot(kSelectorClassFixedKFirst + 1));
  auto s = SelectLearned(half, in, {});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->mode, SyncMode::kFixedK);
  EXPECT_EQ(s->k, 4);
  EXPECT_EQ(half.last_.workers, 8);

  FixedModel groups(OneHot(kSelectorClassGroups));
  s = SelectLearned(groups, in, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->mode, SyncMode::kGroups);
  EXPECT_EQ(s->groups, (std::vector<std::vector<int>>{{0, 1, 2, 3, 4, 5, 6}, {7}}));
}

TEST(SelectLearned, AsgdOnAllReduceFallsToTheNextBestClass) {
  SelectionInput in = Input(Architecture::kAllReduce, {1, 1, 1, 2});
  std::vector<float> scores(kSelectorClassCount, 0.1f);
  scores[kSelectorClassAsgd] = 0.9f;
  scores[kSelectorClassFixedKFirst + 2] = 0.5f;
  FixedModel model(scores);
  auto s = SelectLearned(model, in, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->mode, SyncMode::kFixedK);
  EXPECT_EQ(s->k, 3);
  in.architecture = Architecture::kParameterServer;
  s = SelectLearned(model, in, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->mode, SyncMode::kAsgd);
}

TEST(SelectLearned, FixedKRespectsMinKAndBecomesSsgdAtN) {
  SelectionInput in = Input(Architecture::kAllReduce, {1, 1, 1, 2});
  SelectOptions o;
  o.min_k = 4;
  FixedModel quarter(OneHot(kSelectorClassFixedKFirst));
  auto s = SelectLearned(quarter, in, {}, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->mode, SyncMode::kSsgd);
  EXPECT_EQ(s->k, 4);
  // One worker: every fixed-k fraction rounds to k = 1 = n.
  FixedModel one(OneHot(kSelectorClassFixedKFirst + 3));
  s = SelectLearned(one, Input(Architecture::kAllReduce, {2}), {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->mode, SyncMode::kSsgd);
  EXPECT_EQ(s->k, 1);
}

TEST(SelectLearned, RejectsOutputsItCannotTrust) {
  SelectionInput in = Input(Architecture::kAllReduce, {1, 2});
  FixedModel short_output(std::vector<float>{1.0f, 0.0f});
  auto s = SelectLearned(short_output, in, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("model output"), std::string::npos);
  FixedModel all_nan(std::vector<float>(kSelectorClassCount, std::nanf("")));
  EXPECT_FALSE(SelectLearned(all_nan, in, {}).ok());
  FailingModel failing;
  s = SelectLearned(failing, in, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("model.json"), std::string::npos);
}

TEST(SelectLearned, NeverChoosesANonFiniteScore) {
  SelectionInput in = Input(Architecture::kParameterServer, {1, 1, 1, 2});
  std::vector<float> scores(kSelectorClassCount, -1.0f);
  scores[kSelectorClassAsgd] = std::numeric_limits<float>::infinity();
  scores[kSelectorClassGroups] = std::nanf("");
  scores[kSelectorClassSsgd] = -std::numeric_limits<float>::infinity();
  scores[kSelectorClassFixedKFirst + 1] = -0.5f;
  FixedModel model(scores);
  auto s = SelectLearned(model, in, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->mode, SyncMode::kFixedK);
  EXPECT_EQ(s->k, 2);
}

// Adversarial outputs (random sizes, NaN, infinities, huge and negative values) on
// random jobs: the result is an error or a valid selection, never anything else.
TEST(SelectLearned, AdversarialOutputsNeverGiveAnInvalidSelection) {
  std::mt19937_64 rng(7);
  const float specials[] = {std::nanf(""), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 1e38f, -1e38f, 0.0f,
                            std::numeric_limits<float>::denorm_min()};
  int valid = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 40)(rng);
    std::vector<double> t(n);
    for (double& ti : t) ti = std::uniform_real_distribution<double>(0.01, 3)(rng);
    SelectionInput in = Input(trial % 2 ? Architecture::kParameterServer
                                        : Architecture::kAllReduce, t);
    SelectOptions o;
    o.min_k = std::uniform_int_distribution<int>(1, n)(rng);
    o.consider_groups = trial % 3 != 0;
    std::size_t size = kSelectorClassCount;
    if (trial % 10 == 0) size = std::uniform_int_distribution<std::size_t>(0, 12)(rng);
    std::vector<float> scores(size);
    for (float& v : scores) {
      v = std::uniform_int_distribution<int>(0, 2)(rng) == 0
              ? specials[std::uniform_int_distribution<int>(0, 6)(rng)]
              : std::uniform_real_distribution<float>(-5, 5)(rng);
    }
    FixedModel model(scores);
    auto s = SelectLearned(model, in, {}, o);
    if (!s.ok()) continue;
    ++valid;
    ExpectValid(*s, in, o);
  }
  EXPECT_GT(valid, 300);
}

// The heuristic's choice for `in` and its class.
int HeuristicClass(const SelectionInput& in, const SelectOptions& o) {
  auto h = Select(in, o);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return ClassOf(h->mode, h->k, static_cast<int>(in.iteration_seconds.size()));
}

TEST(SelectLearned, OverridesTheHeuristicOnlyByTheMargin) {
  SelectionInput in = Input(Architecture::kAllReduce, {1, 1, 1, 1, 1, 1, 1, 3});
  SelectOptions o;
  o.learned_override_margin = 0.4;
  const int heuristic = HeuristicClass(in, o);
  const int other = heuristic == kSelectorClassSsgd ? kSelectorClassGroups : kSelectorClassSsgd;
  std::vector<float> unsure(kSelectorClassCount, 0.0f);
  unsure[other] = 0.6f;
  unsure[heuristic] = 0.3f;  // 0.3 below the model's best: within the margin
  FixedModel close(unsure);
  auto s = SelectLearned(close, in, {}, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(ClassOf(s->mode, s->k, 8), heuristic);

  FixedModel sure(OneHot(other));  // 1.0 against 0: beyond the margin
  s = SelectLearned(sure, in, {}, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(ClassOf(s->mode, s->k, 8), other);

  o.learned_override_margin = 0;
  s = SelectLearned(close, in, {}, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(ClassOf(s->mode, s->k, 8), other);
}

TEST(SelectLearned, KeepsTheHeuristicWhenTheCostModelRulesTheChoiceOut) {
  // One worker ten times slower: SSGD waits for it at every update, so the cost model
  // puts SSGD far above the heuristic's choice.
  SelectionInput in = Input(Architecture::kAllReduce, {1, 1, 1, 1, 1, 1, 1, 10});
  SelectOptions o;
  const int heuristic = HeuristicClass(in, o);
  ASSERT_NE(heuristic, kSelectorClassSsgd);
  FixedModel ssgd(OneHot(kSelectorClassSsgd));
  auto s = SelectLearned(ssgd, in, {}, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->mode, SyncMode::kSsgd);
  o.learned_max_estimate_ratio = 1.1;
  s = SelectLearned(ssgd, in, {}, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(ClassOf(s->mode, s->k, 8), heuristic);
}

TEST(SelectLearned, RejectsBadGateOptionsNamingTheField) {
  SelectionInput in = Input(Architecture::kAllReduce, {1, 2});
  FixedModel m(OneHot(kSelectorClassSsgd));
  SelectOptions o;
  o.learned_override_margin = -0.1;
  auto s = SelectLearned(m, in, {}, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("learned_override_margin"), std::string::npos);
  o = {};
  o.learned_max_estimate_ratio = 0.5;
  s = SelectLearned(m, in, {}, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("learned_max_estimate_ratio"), std::string::npos);
}

}  // namespace
}  // namespace star::select
