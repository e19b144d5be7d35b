#include "local/eta.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace star::local {
namespace {

using Curve = std::vector<std::pair<double, double>>;

// Accuracy 1 - 0.6 (t / 4)^-0.6: the target 0.85 is reached at t = 4 (0.6 / 0.15)^(1 / 0.6).
double Accuracy(double t) { return 1 - 0.6 * std::pow(t / 4, -0.6); }
const double kTruth = 4 * std::pow(0.6 / 0.15, 1 / 0.6);  // 40.3 s

TEST(EstimateEta, UnknownWithoutAFallingErrorTrend) {
  EXPECT_FALSE(EstimateEtaSeconds({}, 0.85, 10));
  EXPECT_FALSE(EstimateEtaSeconds({{1, 0.5}, {2, 0.6}}, 0.85, 10));  // two points
  EXPECT_FALSE(EstimateEtaSeconds({{1, 0.6}, {2, 0.6}, {3, 0.6}}, 0.85, 10));  // flat
  EXPECT_FALSE(EstimateEtaSeconds({{1, 0.7}, {2, 0.6}, {3, 0.5}}, 0.85, 10));  // falling
  EXPECT_FALSE(EstimateEtaSeconds({{1, 0.5}, {1, 0.6}, {1, 0.7}}, 0.85, 10));  // no spread in time
  EXPECT_FALSE(EstimateEtaSeconds({{1, 0.5}, {2, 0.6}, {3, 0.7}}, 1.0, 10));  // target 1
  EXPECT_FALSE(EstimateEtaSeconds({{0, 0.5}, {2, 0.6}, {3, 0.7}}, 0.85, 10));  // 2 at t > 0
}

TEST(EstimateEta, FollowsTheSlowingTail) {
  // Mid-run on the power-law curve (20 s left), a line through log(error) in time over
  // the same points would say 5.8 s; the fit in log(time) follows the slowing.
  Curve curve;
  for (double t = 4; t <= 20; t += 4) curve.emplace_back(t, Accuracy(t));
  const auto eta = EstimateEtaSeconds(curve, 0.85, 20);
  ASSERT_TRUE(eta);
  EXPECT_NEAR(20 + *eta, kTruth, 0.5);
  EXPECT_GT(*eta, 4 * 4);  // more than four evaluation intervals away
}

TEST(EstimateEta, ConvergesToTheTruthNearTheEnd) {
  // Evaluations every 4 s; the estimate at the time of each evaluation.
  for (double now = 12; now < kTruth - 4; now += 4) {
    Curve curve;
    for (double t = 4; t <= now; t += 4) curve.emplace_back(t, Accuracy(t));
    const auto eta = EstimateEtaSeconds(curve, 0.85, now);
    ASSERT_TRUE(eta) << now;
    EXPECT_NEAR(now + *eta, kTruth, 0.5) << "at " << now;
  }
}

TEST(EstimateEta, NeverZeroBelowTheTarget) {
  // The newest evaluations lag the trend (the fit says the target is already past):
  // the estimate is still at least one evaluation interval.
  Curve curve = {{10, 0.70}, {20, 0.80}, {30, 0.84}};
  const auto eta = EstimateEtaSeconds(curve, 0.85, 60);
  ASSERT_TRUE(eta);
  EXPECT_GE(*eta, 10);
}

TEST(EstimateEta, OutOfOrderAndNoisyPointsStillGiveAnEstimate) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.005);
  Curve curve;
  for (double t = 40; t >= 4; t -= 4) curve.emplace_back(t, Accuracy(t) + noise(rng));
  const auto eta = EstimateEtaSeconds(curve, 0.85, 40);
  ASSERT_TRUE(eta);
  EXPECT_NEAR(40 + *eta, kTruth, 5);
}

}  // namespace
}  // namespace star::local
