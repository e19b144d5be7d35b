#include "sim/progress.h"

#include <gtest/gtest.h>

#include <vector>

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

ProgressModel Model(double min_updates, double momentum, bool replicas) {
  ProgressModel m;
  m.noise_scale = 0;  // every update is worth 1 at full speed
  m.min_updates = min_updates;
  m.momentum = momentum;
  m.group_replicas = replicas;
  return m;
}

TEST(Progress, MomentumRestartsAtTheStartAndAtEverySwitch) {
  Progress p(Model(100, 0.5, false));
  p.Update(1, 10);  // worth 1 - 0.5
  p.Update(2, 10);  // 1 - 0.25
  EXPECT_DOUBLE_EQ(p.worth(), 1.25);
  p.Switch({});
  p.Update(3, 10);  // 1 - 0.5 again
  EXPECT_DOUBLE_EQ(p.worth(), 1.75);
  Progress none(Model(100, 0, false));
  none.Update(1, 10);
  none.Switch({});
  none.Update(2, 10);
  EXPECT_DOUBLE_EQ(none.worth(), 2);
}

TEST(Progress, GroupReplicasTrainOneCopyPerGroupAveragedOverWorkersAtTheSwitch) {
  Progress p(Model(100, 0, true));
  const std::vector<std::vector<int>> groups = {{0, 1, 2}, {3}};
  p.Switch(groups);
  for (int i = 0; i < 3; ++i) p.Update(i, 10, 0);
  p.Update(3, 10, 1);
  EXPECT_DOUBLE_EQ(p.worth(), 3) << "rank 0's copy has its group's updates only";
  EXPECT_EQ(p.updates(), 4);
  p.Switch({});
  EXPECT_DOUBLE_EQ(p.worth(), (3 * 3 + 1 * 1) / 4.0) << "copies weigh their member counts";
}

TEST(Progress, WithoutReplicasEveryGroupAdvancesOneModel) {
  Progress p(Model(100, 0, false));
  const std::vector<std::vector<int>> groups = {{0, 1, 2}, {3}};
  p.Switch(groups);
  p.Update(1, 10, 0);
  p.Update(2, 10, 1);
  EXPECT_DOUBLE_EQ(p.worth(), 2);
}

TEST(Progress, TheTargetIsJudgedOnRankZerosCopy) {
  Progress p(Model(2, 0, true));
  const std::vector<std::vector<int>> groups = {{1, 2, 3}, {0}};
  p.Switch(groups);
  for (int i = 0; i < 5; ++i) p.Update(i, 10, 0);
  EXPECT_FALSE(p.reached()) << "another group's copy passed the target, not rank 0's";
  p.Update(5, 10, 1);
  p.Update(6, 10, 1);
  ASSERT_TRUE(p.reached());
  EXPECT_EQ(*p.tta(), 6);
}

}  // namespace
}  // namespace star::sim
