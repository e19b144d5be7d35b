#include "star/core/converge/noise_scale_estimator.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "star/core/converge/updates_factor.h"

namespace star::converge {
namespace {

TEST(UpdatesFactor, IsOnePlusNoiseScaleOverBatch) {
  EXPECT_DOUBLE_EQ(UpdatesFactor(32, 0), 1.0);
  EXPECT_DOUBLE_EQ(UpdatesFactor(32, 64), 3.0);
  EXPECT_DOUBLE_EQ(UpdatesFactor(0.5, 1), 3.0);
}

TEST(UpdatesFactor, DecreasesTowardsOneAsBatchGrows) {
  double previous = UpdatesFactor(1, 100);
  for (double b = 2; b <= 1 << 20; b *= 2) {
    const double now = UpdatesFactor(b, 100);
    EXPECT_LT(now, previous) << "b=" << b;
    EXPECT_GT(now, 1.0) << "b=" << b;
    previous = now;
  }
}

// Synthetic training step: n workers each draw a mean gradient over b_small samples
// from N(G, Sigma / b_small) with diagonal Sigma; the aggregate is their mean (batch
// n * b_small), exactly what the all-reduce computes.
class SyntheticGradients {
 public:
  SyntheticGradients(uint64_t seed, int dims) : rng_(seed), g_(dims), sigma_(dims) {
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_real_distribution<double> var(1.0, 7.0);
    for (int j = 0; j < dims; ++j) {
      g_[j] = 0.2 * normal(rng_);
      sigma_[j] = std::sqrt(var(rng_));
    }
  }
  double TrueNoiseScale() const {
    double g_sq = 0, trace = 0;
    for (size_t j = 0; j < g_.size(); ++j) {
      g_sq += g_[j] * g_[j];
      trace += sigma_[j] * sigma_[j];
    }
    return trace / g_sq;
  }
  // Returns the workers' local squared norms and the aggregate's squared norm.
  std::pair<std::vector<double>, double> Step(int workers, double b_small) {
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> local_sq(workers, 0.0);
    std::vector<double> sum(g_.size(), 0.0);
    for (int w = 0; w < workers; ++w) {
      for (size_t j = 0; j < g_.size(); ++j) {
        const double x = g_[j] + sigma_[j] / std::sqrt(b_small) * normal(rng_);
        local_sq[w] += x * x;
        sum[j] += x;
      }
    }
    double big_sq = 0;
    for (double s : sum) big_sq += (s / workers) * (s / workers);
    return {local_sq, big_sq};
  }

 private:
  std::mt19937_64 rng_;
  std::vector<double> g_;
  std::vector<double> sigma_;
};

TEST(NoiseScaleEstimator, ConvergesToTraceSigmaOverGradientNormOnSyntheticGradients) {
  constexpr int kWorkers = 8;
  constexpr double kBSmall = 32;
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    SyntheticGradients data(seed, 40);
    auto est = NoiseScaleEstimator::Create({.alpha = 0.004, .min_observations = 10});
    ASSERT_TRUE(est.ok());
    for (int it = 0; it < 2000; ++it) {
      auto [local_sq, big_sq] = data.Step(kWorkers, kBSmall);
      for (double l : local_sq) {
        ASSERT_TRUE(est->Observe(kBSmall, l, kWorkers * kBSmall, big_sq).ok());
      }
    }
    const double truth = data.TrueNoiseScale();
    ASSERT_TRUE(est->NoiseScale().has_value());
    // Tolerance: 10% of the true value (alpha = 0.004 averages ~250 noisy estimates).
    EXPECT_NEAR(*est->NoiseScale(), truth, 0.10 * truth) << "seed " << seed;
  }
}

TEST(NoiseScaleEstimator, DefaultOptionsTrackTheTrueValueWithinAThird) {
  SyntheticGradients data(42, 40);
  NoiseScaleEstimator est;
  for (int it = 0; it < 500; ++it) {
    auto [local_sq, big_sq] = data.Step(8, 32);
    for (double l : local_sq) ASSERT_TRUE(est.Observe(32, l, 256, big_sq).ok());
  }
  const double truth = data.TrueNoiseScale();
  ASSERT_TRUE(est.NoiseScale().has_value());
  EXPECT_NEAR(*est.NoiseScale(), truth, truth / 3);
}

TEST(NoiseScaleEstimator, IsExactOnExpectedNorms) {
  // E|g_b|^2 = |G|^2 + tr(Sigma) / b: the estimators recover both terms exactly.
  const double g_sq = 2.0, trace = 500.0;
  NoiseScaleEstimator est;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(est.Observe(16, g_sq + trace / 16, 128, g_sq + trace / 128).ok());
  }
  EXPECT_NEAR(est.GradientSqNorm(), g_sq, 1e-9);
  EXPECT_NEAR(est.TraceSigma(), trace, 1e-9);
  ASSERT_TRUE(est.NoiseScale().has_value());
  EXPECT_NEAR(*est.NoiseScale(), trace / g_sq, 1e-9);
}

TEST(NoiseScaleEstimator, NulloptUntilMinObservations) {
  auto est = NoiseScaleEstimator::Create({.alpha = 0.1, .min_observations = 3});
  ASSERT_TRUE(est.ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(est->Observe(16, 3, 64, 1.5).ok());
    EXPECT_FALSE(est->NoiseScale().has_value()) << "after " << i + 1;
  }
  ASSERT_TRUE(est->Observe(16, 3, 64, 1.5).ok());
  EXPECT_TRUE(est->NoiseScale().has_value());
  EXPECT_EQ(est->observations(), 3);
}

TEST(NoiseScaleEstimator, NulloptWhileGradientNormEstimateIsNotPositive) {
  auto est = NoiseScaleEstimator::Create({.alpha = 0.5, .min_observations = 1});
  ASSERT_TRUE(est.ok());
  // |G|^2 estimate (2*1 - 1*10) / 1 = -8.
  ASSERT_TRUE(est->Observe(1, 10, 2, 1).ok());
  EXPECT_LT(est->GradientSqNorm(), 0);
  EXPECT_FALSE(est->NoiseScale().has_value());
}

TEST(NoiseScaleEstimator, NegativeTraceEstimateGivesZero) {
  auto est = NoiseScaleEstimator::Create({.alpha = 0.5, .min_observations = 1});
  ASSERT_TRUE(est.ok());
  // The big batch has the larger norm: tr(Sigma) estimate < 0, |G|^2 > 0.
  ASSERT_TRUE(est->Observe(10, 1, 20, 2).ok());
  EXPECT_LT(est->TraceSigma(), 0);
  ASSERT_TRUE(est->NoiseScale().has_value());
  EXPECT_EQ(*est->NoiseScale(), 0.0);
}

TEST(NoiseScaleEstimator, RejectsInvalidObservationsAndKeepsState) {
  auto est = NoiseScaleEstimator::Create({.alpha = 0.1, .min_observations = 1});
  ASSERT_TRUE(est.ok());
  ASSERT_TRUE(est->Observe(16, 3, 64, 1.5).ok());
  const double before = *est->NoiseScale();

  struct Case {
    double b_small, g_small_sq, b_big, g_big_sq;
    const char* field;
  };
  const double nan = std::nan("");
  for (const Case& c : {Case{0, 1, 64, 1, "b_small"}, Case{-1, 1, 64, 1, "b_small"},
                        Case{16, 1, 16, 1, "b_big"}, Case{16, 1, 8, 1, "b_big"},
                        Case{16, -1, 64, 1, "g_small_sq"}, Case{16, 1, 64, -1, "g_big_sq"},
                        Case{16, nan, 64, 1, "g_small_sq"},
                        Case{16, 1, INFINITY, 1, "b_big"}}) {
    Status s = est->Observe(c.b_small, c.g_small_sq, c.b_big, c.g_big_sq);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(s.message().rfind(c.field, 0), 0u) << s.message();
  }
  EXPECT_EQ(est->observations(), 1);
  EXPECT_EQ(*est->NoiseScale(), before);
}

TEST(NoiseScaleEstimator, CreateRejectsInvalidOptions) {
  EXPECT_EQ(NoiseScaleEstimator::Create({.alpha = 0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NoiseScaleEstimator::Create({.alpha = 1.5}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NoiseScaleEstimator::Create({.alpha = 0.1, .min_observations = 0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(NoiseScaleEstimator::Create({.alpha = 1, .min_observations = 1}).ok());
}

}  // namespace
}  // namespace star::converge
