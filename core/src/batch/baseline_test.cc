#include "star/core/batch/baseline.h"

#include <numeric>

#include <gtest/gtest.h>

namespace star::batch {
namespace {

TEST(EqualBatches, SplitsEvenlyWhenTheGlobalBatchDivides) {
  EXPECT_EQ(EqualBatches(256, 4), (std::vector<int64_t>{64, 64, 64, 64}));
}

TEST(EqualBatches, GivesTheRemainderToTheLowestRanks) {
  EXPECT_EQ(EqualBatches(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(EqualBatches(259, 4), (std::vector<int64_t>{65, 65, 65, 64}));
}

TEST(EqualBatches, AlwaysSumsToTheGlobalBatch) {
  for (int n = 1; n <= 9; ++n) {
    for (int64_t g : {1, 7, 64, 1000, 1001}) {
      const std::vector<int64_t> b = EqualBatches(g, n);
      ASSERT_EQ(b.size(), static_cast<size_t>(n));
      EXPECT_EQ(std::accumulate(b.begin(), b.end(), int64_t{0}), g) << g << " over " << n;
    }
  }
}

TEST(EqualBatches, FewerSamplesThanWorkersLeavesTheHighestRanksEmpty) {
  EXPECT_EQ(EqualBatches(2, 4), (std::vector<int64_t>{1, 1, 0, 0}));
}

TEST(EqualBatches, NoWorkersGiveNoBatches) {
  EXPECT_TRUE(EqualBatches(64, 0).empty());
  EXPECT_TRUE(EqualBatches(64, -1).empty());
}

}  // namespace
}  // namespace star::batch
