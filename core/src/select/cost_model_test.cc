#include "star/core/select/cost_model.h"

#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "star/core/converge/updates_factor.h"

namespace star::select {
namespace {

using converge::UpdatesFactor;

std::vector<double> RandomTimes(std::mt19937_64& rng, int n) {
  std::uniform_real_distribution<double> base(0.05, 2.0);
  std::uniform_real_distribution<double> slow(1.0, 4.0);
  std::vector<double> t(n);
  for (double& x : t) x = base(rng);
  // Sometimes a few stragglers, sometimes ties.
  if (rng() % 2 == 0) t[rng() % n] *= slow(rng);
  if (n > 2 && rng() % 4 == 0) t[1] = t[0];
  return t;
}

TEST(SsgdSecondsPerProgress, IsSlowestTimeTimesFactorOfGlobalBatch) {
  EXPECT_DOUBLE_EQ(SsgdSecondsPerProgress({1.0, 3.0, 2.0}, 32, 96), 3.0 * (1 + 96.0 / 96));
  EXPECT_DOUBLE_EQ(SsgdSecondsPerProgress({0.5}, 10, 0), 0.5);
}

TEST(AsgdSecondsPerProgress, IsStalenessTimesPenaltyTimesFactorOverTotalRate) {
  // rate = 1/1 + 1/2 = 1.5; n = 2; I(B) = 1 + 8/8 = 2.
  EXPECT_DOUBLE_EQ(AsgdSecondsPerProgress({1.0, 2.0}, 8, 8, 1.5), 2 * 1.5 * 2 / 1.5);
}

TEST(AsgdSecondsPerProgress, NeverBeatsSsgdWhenTimesAreEqual) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.01, 5.0);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 64);
    const std::vector<double> t(n, u(rng));
    const double b = 1 + static_cast<double>(rng() % 256);
    const double phi = u(rng) * 1000;
    // Equal in exact arithmetic when n = 1 or phi = 0: allow rounding.
    EXPECT_GE(AsgdSecondsPerProgress(t, b, phi, 1.0),
              SsgdSecondsPerProgress(t, b, phi) * (1 - 1e-12))
        << "n=" << n;
  }
}

// The rule exactly as ALGORITHMS.md states it, written out with no shortcuts.
int BruteForceKStar(std::vector<double> t, double b, double phi) {
  std::sort(t.begin(), t.end());
  const int n = static_cast<int>(t.size());
  std::vector<double> cost(n + 1);  // cost[i] = I(iB) t_(i), 1-based
  for (int i = 1; i <= n; ++i) cost[i] = UpdatesFactor(i * b, phi) * t[i - 1];
  for (int i = 1; i <= n - 1; ++i) {
    if (cost[i] < cost[i + 1]) return i;
  }
  return n;
}

TEST(StarKStar, MatchesBruteForceOfTheStatedRule) {
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> phi_dist(0, 4000);
  int below_n = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    const std::vector<double> t = RandomTimes(rng, n);
    const double b = 1 + static_cast<double>(rng() % 128);
    const double phi = trial % 10 == 0 ? 0.0 : phi_dist(rng);
    const int k = StarKStar(t, b, phi);
    ASSERT_EQ(k, BruteForceKStar(t, b, phi)) << "trial " << trial;
    ASSERT_GE(k, 1);
    ASSERT_LE(k, n);
    below_n += k < n;
  }
  // The random inputs exercise both outcomes.
  EXPECT_GT(below_n, 100);
  EXPECT_LT(below_n, 2900);
}

TEST(StarKStar, IsNWhenTimesAreEqualRegressionInvertedBranch) {
  // Equal times make T(k) = I(kB) t strictly decreasing: no local minimum before n.
  // STAR's code tested the inverted inequality and would answer 1 here.
  for (int n : {1, 2, 8, 100}) {
    EXPECT_EQ(StarKStar(std::vector<double>(n, 0.7), 32, 500), n) << "n=" << n;
  }
}

TEST(StarKStar, StopsAtTheFirstLocalMinimumNotTheGlobalOne) {
  // B = 1, phi = 6: T(1) = 7, T(2) = 4, T(3) = 2 * 3 = 6, ..., T(8) = 2 * 1.75 = 3.5.
  const std::vector<double> t = {1, 1, 2, 2, 2, 2, 2, 2};
  EXPECT_EQ(StarKStar(t, 1, 6), 2);
}

TEST(StarKStar, AcceptsTimesInAnyOrder) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> t = RandomTimes(rng, 2 + static_cast<int>(rng() % 20));
    std::vector<double> sorted = t;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(StarKStar(t, 16, 300), StarKStar(sorted, 16, 300));
  }
}

TEST(StarKStar, ZeroNoiseScalePicksOneWhenTheFastestIsStrictlyFaster) {
  // With phi = 0 every update is worth the same, so the fastest worker alone wins.
  EXPECT_EQ(StarKStar({1.0, 1.5, 2.0}, 32, 0), 1);
}

TEST(GroupsSecondsPerProgress, OneGroupOfEveryoneEqualsSsgd) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 30);
    const std::vector<double> t = RandomTimes(rng, n);
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    EXPECT_DOUBLE_EQ(GroupsSecondsPerProgress(t, {all}, 8, 100),
                     SsgdSecondsPerProgress(t, 8, 100));
  }
}

TEST(GroupsSecondsPerProgress, CombinesGroupRates) {
  // Groups {0,1} (t_max 1, I(2B) = 1 + 4/4 = 2) and {2} (t_max 3, I(B) = 1 + 4/2 = 3):
  // 1 / (1/2 + 1/9) = 18/11.
  EXPECT_DOUBLE_EQ(GroupsSecondsPerProgress({1.0, 0.5, 3.0}, {{0, 1}, {2}}, 2, 4), 18.0 / 11);
}

}  // namespace
}  // namespace star::select
