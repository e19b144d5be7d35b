#include "star/core/select/clustering.h"

#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace star::select {
namespace {

double Spread(const std::vector<double>& t, const std::vector<int>& ids, double* fastest) {
  double lo = t[ids[0]], hi = t[ids[0]];
  for (int id : ids) {
    lo = std::min(lo, t[id]);
    hi = std::max(hi, t[id]);
  }
  *fastest = lo;
  return hi - lo;
}

TEST(ClusterByTime, EqualTimesFormOneGroup) {
  const auto groups = ClusterByTime(std::vector<double>(7, 2.5), 0, 0);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0], (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(ClusterByTime, SeparatesAClearStraggler) {
  const auto groups = ClusterByTime({1.00, 1.01, 3.0, 0.99, 1.02}, 0.05, 0.1);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(groups[1], (std::vector<int>{2}));
}

TEST(ClusterByTime, ZeroThresholdsSplitDistinctTimes) {
  const auto groups = ClusterByTime({0.3, 0.1, 0.2, 0.1}, 0, 0);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0], (std::vector<int>{1, 3}));
  EXPECT_EQ(groups[1], (std::vector<int>{2}));
  EXPECT_EQ(groups[2], (std::vector<int>{0}));
}

TEST(ClusterByTime, RespectsTheThresholdAndStopsOnlyWhenNoNeighboursCanMerge) {
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> u(0.05, 3.0);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 60);
    std::vector<double> t(n);
    for (double& x : t) x = u(rng);
    const double abs_threshold = (rng() % 4) * 0.05;
    const double rel_threshold = (rng() % 4) * 0.05;
    const auto groups = ClusterByTime(t, abs_threshold, rel_threshold);

    // A partition of all ids, ids ascending inside a group, groups ordered by time.
    std::vector<int> seen(n, 0);
    double previous_fastest = -1;
    for (const auto& g : groups) {
      ASSERT_FALSE(g.empty());
      EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
      for (int id : g) ++seen[id];
      double fastest = 0;
      const double spread = Spread(t, g, &fastest);
      // Threshold respected.
      EXPECT_LE(spread, std::max(abs_threshold, rel_threshold * fastest)) << "trial " << trial;
      EXPECT_GT(fastest, previous_fastest);
      previous_fastest = fastest;
    }
    for (int i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "id " << i;

    // Maximal: no two neighbouring groups could have merged.
    for (size_t g = 0; g + 1 < groups.size(); ++g) {
      std::vector<int> both = groups[g];
      both.insert(both.end(), groups[g + 1].begin(), groups[g + 1].end());
      double fastest = 0;
      const double spread = Spread(t, both, &fastest);
      EXPECT_GT(spread, std::max(abs_threshold, rel_threshold * fastest)) << "trial " << trial;
    }
  }
}

TEST(ClusterByTime, MergesTheClosestPairFirst) {
  // Chain 1.00, 1.04, 1.06 with threshold 0.05: {1.04, 1.06} (spread 0.02) merges first,
  // then {1.00} cannot join (spread 0.06). Greedy left-to-right would keep {1.00, 1.04}.
  const auto groups = ClusterByTime({1.00, 1.04, 1.06}, 0.05, 0);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<int>{0}));
  EXPECT_EQ(groups[1], (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace star::select
