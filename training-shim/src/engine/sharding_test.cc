#include "star/shim/sharding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace star::shim {
namespace {

TEST(PlanShards, AssignsLargestFirstToTheLeastLoadedServer) {
  // 5 -> s0, 4 -> s1, 3 (t2) -> s1 (4 < 5), 3 (t3) -> s0 (5 < 7), 2 -> s1, 1 -> s0.
  StatusOr<ShardPlan> plan = PlanShards({5, 4, 3, 3, 2, 1}, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->owner, (std::vector<int>{0, 1, 1, 0, 1, 0}));
  EXPECT_EQ(plan->tensors, (std::vector<std::vector<size_t>>{{0, 3, 5}, {1, 2, 4}}));
  EXPECT_EQ(plan->load, (std::vector<size_t>{9, 9}));
  EXPECT_EQ(plan->offset, (std::vector<size_t>{0, 5, 9, 12, 15, 17}));
  EXPECT_EQ(plan->total, 18u);
}

TEST(PlanShards, EveryTensorExactlyOnceAndBalanced) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int p = 1 + trial % 6;
    std::vector<size_t> sizes(1 + std::uniform_int_distribution<size_t>(0, 30)(rng));
    for (size_t& s : sizes) s = std::uniform_int_distribution<size_t>(1, 1000)(rng);
    StatusOr<ShardPlan> plan = PlanShards(sizes, p);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->tensors.size(), static_cast<size_t>(p));
    std::vector<int> seen(sizes.size(), 0);
    size_t total = 0;
    for (int s = 0; s < p; ++s) {
      const auto& ts = plan->tensors[static_cast<size_t>(s)];
      EXPECT_TRUE(std::is_sorted(ts.begin(), ts.end()));
      size_t load = 0;
      for (size_t t : ts) {
        ++seen[t];
        EXPECT_EQ(plan->owner[t], s);
        load += sizes[t];
      }
      EXPECT_EQ(load, plan->load[static_cast<size_t>(s)]);
      total += load;
    }
    for (size_t t = 0; t < sizes.size(); ++t) EXPECT_EQ(seen[t], 1) << "tensor " << t;
    EXPECT_EQ(total, plan->total);
    const auto [lo, hi] = std::minmax_element(plan->load.begin(), plan->load.end());
    if (sizes.size() >= static_cast<size_t>(p)) {
      EXPECT_LE(*hi - *lo, *std::max_element(sizes.begin(), sizes.end()));
    }
  }
}

TEST(PlanShards, MoreServersThanTensorsLeavesSomeEmpty) {
  StatusOr<ShardPlan> plan = PlanShards({3, 1}, 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->load, (std::vector<size_t>{3, 1, 0}));
  EXPECT_TRUE(plan->tensors[2].empty());
}

TEST(PlanShards, RejectsBadInputNamingTheField) {
  EXPECT_EQ(PlanShards({1}, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanShards({}, 2).status().code(), StatusCode::kInvalidArgument);
  const Status zero = PlanShards({4, 0}, 2).status();
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.message().find("tensor_sizes[1]"), std::string::npos) << zero;
}

}  // namespace
}  // namespace star::shim
