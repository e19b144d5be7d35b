#include "star/core/select/selector.h"

#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace star::select {
namespace {

using api::Architecture;
using api::SyncMode;

SelectionInput Input(Architecture arch, double b, double phi, std::vector<double> t) {
  SelectionInput in;
  in.architecture = arch;
  in.batch_per_worker = b;
  in.noise_scale = phi;
  in.iteration_seconds = std::move(t);
  return in;
}

const Candidate* Find(const Selection& s, SyncMode mode) {
  for (const Candidate& c : s.candidates) {
    if (c.mode == mode) return &c;
  }
  return nullptr;
}

std::vector<int> Iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(Select, PicksSsgdWhenAllTimesAreEqual) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0.01, 5.0);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 64);
    const auto arch = trial % 2 ? Architecture::kParameterServer : Architecture::kAllReduce;
    const double b = 1 + static_cast<double>(rng() % 256);
    const auto in = Input(arch, b, u(rng) * 1000, std::vector<double>(n, u(rng)));
    auto s = Select(in);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->mode, SyncMode::kSsgd) << "trial " << trial;
    EXPECT_EQ(s->k, n);
    EXPECT_EQ(s->groups, std::vector<std::vector<int>>{Iota(n)});
    EXPECT_DOUBLE_EQ(s->estimated_seconds_per_progress,
                     SsgdSecondsPerProgress(in.iteration_seconds, in.batch_per_worker,
                                            in.noise_scale));
  }
}

TEST(Select, PicksSsgdWhenTimesAreNearlyEqual) {
  // Jitter of +-0.1% around a common time; noise scale 1x..8x the local batch. The
  // largest gap between sorted times (0.2%) is below what makes k* < n for n <= 16
  // (about (phi/B) / (n (n-1) + (n-1) phi/B) >= 0.39%), and far below the group
  // thresholds, so SSGD must win.
  std::mt19937_64 rng(2);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 15);
    const double base = std::uniform_real_distribution<double>(0.05, 3.0)(rng);
    std::uniform_real_distribution<double> jitter(-0.001, 0.001);
    std::vector<double> t(n);
    for (double& x : t) x = base * (1 + jitter(rng));
    const double b = 8 + static_cast<double>(rng() % 120);
    const double phi = b * std::uniform_real_distribution<double>(1, 8)(rng);
    const auto arch = trial % 2 ? Architecture::kParameterServer : Architecture::kAllReduce;
    auto s = Select(Input(arch, b, phi, t));
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->mode, SyncMode::kSsgd) << "trial " << trial;
  }
}

TEST(Select, ChosenEstimateIsNeverAboveTheKStarCandidateOrSsgd) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0.02, 2.0);
  std::uniform_real_distribution<double> slow(1.0, 6.0);
  int left_ssgd = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 24);
    std::vector<double> t(n);
    for (double& x : t) x = u(rng);
    const int stragglers = static_cast<int>(rng() % 3);
    for (int j = 0; j < stragglers; ++j) t[rng() % n] *= slow(rng);
    if (trial % 5 == 0) std::fill(t.begin(), t.end(), t[0]);
    const double b = 1 + static_cast<double>(rng() % 128);
    const double phi = trial % 7 == 0 ? 0.0 : b * std::uniform_real_distribution<double>(0, 30)(rng);
    const auto arch = trial % 2 ? Architecture::kParameterServer : Architecture::kAllReduce;
    SelectOptions opt;
    opt.allow_asgd_with_allreduce = trial % 3 == 0;
    opt.ssgd_preference_margin = (trial % 4) * 0.05;
    opt.simulated_updates = 200;
    auto s = Select(Input(arch, b, phi, t), opt);
    ASSERT_TRUE(s.ok()) << s.status();

    const Candidate* ssgd = Find(*s, SyncMode::kSsgd);
    ASSERT_NE(ssgd, nullptr);
    const Candidate* fixed = Find(*s, SyncMode::kFixedK);
    const int k_star = StarKStar(t, b, phi);
    ASSERT_EQ(fixed != nullptr, k_star < n) << "trial " << trial;
    const double k_star_estimate = fixed != nullptr ? fixed->estimated_seconds_per_progress
                                                    : ssgd->estimated_seconds_per_progress;
    if (fixed != nullptr) {
      EXPECT_EQ(fixed->k, k_star);
    }
    EXPECT_LE(s->estimated_seconds_per_progress, k_star_estimate) << "trial " << trial;
    EXPECT_LE(s->estimated_seconds_per_progress, ssgd->estimated_seconds_per_progress)
        << "trial " << trial;
    // The reported estimate is the chosen candidate's.
    const Candidate* chosen = Find(*s, s->mode);
    ASSERT_NE(chosen, nullptr);
    EXPECT_EQ(chosen->estimated_seconds_per_progress, s->estimated_seconds_per_progress);
    // The rule itself: SSGD within the margin of the best, otherwise the best.
    double best = ssgd->estimated_seconds_per_progress;
    for (const Candidate& c : s->candidates) best = std::min(best, c.estimated_seconds_per_progress);
    if (s->mode == SyncMode::kSsgd) {
      EXPECT_LE(s->estimated_seconds_per_progress, (1 + opt.ssgd_preference_margin) * best);
    } else {
      EXPECT_EQ(s->estimated_seconds_per_progress, best) << "trial " << trial;
    }
    left_ssgd += s->mode != SyncMode::kSsgd;
  }
  EXPECT_GT(left_ssgd, 300);  // the property is exercised on both sides
}

TEST(Select, LeavesSsgdForAClearStraggler) {
  for (auto arch : {Architecture::kAllReduce, Architecture::kParameterServer}) {
    for (double phi_over_b : {0.5, 2.0, 8.0}) {
      std::vector<double> t(8, 0.4);
      t[5] = 1.2;  // one worker 3x slower
      auto s = Select(Input(arch, 32, 32 * phi_over_b, t));
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_NE(s->mode, SyncMode::kSsgd) << "phi/B " << phi_over_b;
      EXPECT_LT(s->estimated_seconds_per_progress,
                SsgdSecondsPerProgress(t, 32, 32 * phi_over_b));
    }
  }
}

TEST(Select, GroupsModeReportsTheGroups) {
  std::vector<double> t(8, 0.4);
  t[5] = 1.2;
  SelectOptions opt;
  auto s = Select(Input(Architecture::kAllReduce, 32, 64, t), opt);
  ASSERT_TRUE(s.ok());
  const Candidate* groups = Find(*s, SyncMode::kGroups);
  ASSERT_NE(groups, nullptr);
  EXPECT_EQ(groups->groups, (std::vector<std::vector<int>>{{0, 1, 2, 3, 4, 6, 7}, {5}}));
  if (s->mode == SyncMode::kGroups) {
    EXPECT_EQ(s->groups, groups->groups);
    EXPECT_EQ(s->k, 8);
  }
}

TEST(Select, AsgdIsACandidateOnlyWithAParameterServerUnlessAllowed) {
  std::vector<double> t = {0.1, 0.2, 0.3, 0.9};
  auto ar = Select(Input(Architecture::kAllReduce, 16, 10, t));
  ASSERT_TRUE(ar.ok());
  EXPECT_EQ(Find(*ar, SyncMode::kAsgd), nullptr);
  EXPECT_NE(ar->mode, SyncMode::kAsgd);

  SelectOptions allow;
  allow.allow_asgd_with_allreduce = true;
  auto ar_allowed = Select(Input(Architecture::kAllReduce, 16, 10, t), allow);
  ASSERT_TRUE(ar_allowed.ok());
  EXPECT_NE(Find(*ar_allowed, SyncMode::kAsgd), nullptr);

  auto ps = Select(Input(Architecture::kParameterServer, 16, 10, t));
  ASSERT_TRUE(ps.ok());
  const Candidate* asgd = Find(*ps, SyncMode::kAsgd);
  ASSERT_NE(asgd, nullptr);
  EXPECT_EQ(asgd->k, 1);
}

TEST(Select, MinKBoundsTheFixedKCandidateAndExcludesAsgd) {
  std::vector<double> t = {0.1, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1};
  SelectOptions opt;
  opt.min_k = 5;
  auto s = Select(Input(Architecture::kParameterServer, 16, 0, t), opt);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(StarKStar(t, 16, 0), 1);
  const Candidate* fixed = Find(*s, SyncMode::kFixedK);
  ASSERT_NE(fixed, nullptr);
  EXPECT_EQ(fixed->k, 5);
  EXPECT_EQ(Find(*s, SyncMode::kAsgd), nullptr);
  for (const Candidate& c : s->candidates) {
    if (c.mode != SyncMode::kGroups) continue;
    for (const auto& g : c.groups) EXPECT_GE(static_cast<int>(g.size()), 5);
  }
}

TEST(Select, SsgdPreferenceMarginKeepsSsgdOnlyWhenNotWorseThanKStar) {
  // A margin large enough to cover any gap: SSGD must still not be kept when the k*
  // candidate's estimate is below SSGD's.
  std::vector<double> t(8, 0.4);
  t[5] = 1.2;
  SelectOptions huge;
  huge.ssgd_preference_margin = 100;
  auto s = Select(Input(Architecture::kAllReduce, 32, 64, t), huge);
  ASSERT_TRUE(s.ok());
  // k* < n here and the fixed-k estimate beats SSGD, so no margin may bring SSGD back.
  const Candidate* fixed = Find(*s, SyncMode::kFixedK);
  ASSERT_NE(fixed, nullptr);
  ASSERT_LT(fixed->estimated_seconds_per_progress,
            s->candidates.front().estimated_seconds_per_progress);
  EXPECT_NE(s->mode, SyncMode::kSsgd);
}

TEST(Select, SingleWorkerIsSsgd) {
  auto s = Select(Input(Architecture::kParameterServer, 8, 100, {0.3}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->mode, SyncMode::kSsgd);
  EXPECT_EQ(s->k, 1);
  EXPECT_EQ(s->groups, (std::vector<std::vector<int>>{{0}}));
  EXPECT_EQ(s->candidates.size(), 1u);
}

TEST(Select, IsDeterministic) {
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> u(0.1, 2.0);
  std::vector<double> t(50);
  for (double& x : t) x = u(rng);
  auto a = Select(Input(Architecture::kParameterServer, 32, 500, t));
  auto b = Select(Input(Architecture::kParameterServer, 32, 500, t));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(ToJson(*a, true), ToJson(*b, true));
}

TEST(Select, RejectsInvalidInputNamingTheField) {
  struct Case {
    SelectionInput in;
    const char* message;
  };
  const Case cases[] = {
      {Input(Architecture::kAllReduce, 0, 1, {1}), "batch_per_worker: must be > 0, got 0"},
      {Input(Architecture::kAllReduce, 8, -1, {1}), "noise_scale: must be >= 0, got -1"},
      {Input(Architecture::kAllReduce, 8, 1, {}), "iteration_seconds: must not be empty"},
      {Input(Architecture::kAllReduce, 8, 1, {1, -2}),
       "iteration_seconds[1]: must be > 0, got -2"},
      {Input(Architecture::kAllReduce, 8, 1, {1, 0}), "iteration_seconds[1]: must be > 0, got 0"},
      {Input(static_cast<Architecture>(7), 8, 1, {1}), "architecture: unknown value 7"},
  };
  for (const Case& c : cases) {
    auto s = Select(c.in);
    ASSERT_FALSE(s.ok()) << c.message;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().message(), c.message);
  }
}

TEST(Select, RejectsInvalidOptionsNamingTheField) {
  const auto in = Input(Architecture::kAllReduce, 8, 1, {1, 2});
  SelectOptions o;
  o.min_k = 0;
  EXPECT_EQ(Select(in, o).status().message(), "min_k: must be >= 1, got 0");
  o = {};
  o.asgd_resource_penalty = 0.5;
  EXPECT_EQ(Select(in, o).status().message(), "asgd_resource_penalty: must be >= 1, got 0.5");
  o = {};
  o.simulated_updates = 0;
  EXPECT_EQ(Select(in, o).status().message(), "simulated_updates: must be >= 1, got 0");
  o = {};
  o.group_threshold_seconds = -1;
  EXPECT_EQ(Select(in, o).status().message(), "group_threshold_seconds: must be >= 0, got -1");
  o = {};
  o.ssgd_preference_margin = -0.1;
  EXPECT_EQ(Select(in, o).status().message(), "ssgd_preference_margin: must be >= 0, got -0.1");
}

}  // namespace
}  // namespace star::select
