#include "sim/progress.h"

#include <gtest/gtest.h>

namespace star::sim {
namespace {

TEST(Progress, AnUpdateIsWorthOneOverOnePlusNoiseScaleOverBatch) {
  Progress p(1000, 10, 0.1);
  EXPECT_DOUBLE_EQ(p.Worth(1000), 0.5);
  EXPECT_DOUBLE_EQ(p.Worth(3000), 0.75);
  EXPECT_EQ(p.Worth(0), 0);
  Progress clean(0, 10, 0.1);
  EXPECT_EQ(clean.Worth(1), 1);  // no gradient noise: every update counts in full
}

TEST(Progress, StaleSamplesAreDiscountedByThePenalty) {
  Progress p(1000, 10, 0.1);
  EXPECT_DOUBLE_EQ(p.Discounted(32, 0), 32);
  EXPECT_DOUBLE_EQ(p.Discounted(32, 10), 16);
  Progress none(1000, 10, 0);
  EXPECT_DOUBLE_EQ(none.Discounted(32, 63), 32);
}

TEST(Progress, TheTargetIsReachedAtTheUpdateThatCompletesIt) {
  Progress p(1000, 2, 0);
  p.Update(1, 1000);
  p.Update(2, 1000);
  p.Update(3, 1000);
  EXPECT_FALSE(p.reached());
  p.Update(4, 1000);
  ASSERT_TRUE(p.reached());
  EXPECT_EQ(*p.tta(), 4);
  p.Update(5, 1000);
  EXPECT_EQ(*p.tta(), 4);
  EXPECT_EQ(p.updates(), 5);
}

TEST(Progress, ACarryJoinsTheNextUpdateOnly) {
  Progress p(1000, 100, 0);
  p.Carry(500);
  p.Update(1, 500);  // 1000 samples: worth 0.5
  EXPECT_DOUBLE_EQ(p.worth(), 0.5);
  p.Update(2, 1000);
  EXPECT_DOUBLE_EQ(p.worth(), 1.0);
}

}  // namespace
}  // namespace star::sim
