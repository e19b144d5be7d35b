#include "star/core/amp/policy.h"

#include <gtest/gtest.h>

namespace star::amp {
namespace {

using api::StragglerCause;
using Change = AmpPolicy::Change;
constexpr auto kCompute = StragglerCause::kCompute;
constexpr auto kComm = StragglerCause::kCommunication;

TEST(AmpPolicy, ComputeStragglerTurnsAmpOnAfterEnableAfterObservations) {
  AmpPolicy p(AmpOptions{.enable_after = 3});
  std::vector<Change> changes;
  ASSERT_TRUE(p.Observe(2, true, kCompute, 10, &changes).ok());
  ASSERT_TRUE(p.Observe(2, true, kCompute, 20, &changes).ok());
  EXPECT_TRUE(changes.empty());
  EXPECT_FALSE(p.Enabled(2));
  ASSERT_TRUE(p.Observe(2, true, kCompute, 30, &changes).ok());
  EXPECT_EQ(changes, (std::vector<Change>{{2, true, 30}}));
  EXPECT_TRUE(p.Enabled(2));
  EXPECT_EQ(p.States(3), (std::vector<bool>{false, false, true}));
}

TEST(AmpPolicy, DefaultTurnsOnAtFirstComputeStraggleObservation) {
  AmpPolicy p(AmpOptions{});
  std::vector<Change> changes;
  ASSERT_TRUE(p.Observe(0, true, kCompute, 5, &changes).ok());
  EXPECT_EQ(changes, (std::vector<Change>{{0, true, 5}}));
}

TEST(AmpPolicy, InterruptedStraggleRestartsTheEnableCount) {
  AmpPolicy p(AmpOptions{.enable_after = 2});
  std::vector<Change> changes;
  ASSERT_TRUE(p.Observe(0, true, kCompute, 1, &changes).ok());
  ASSERT_TRUE(p.Observe(0, false, kCompute, 2, &changes).ok());
  ASSERT_TRUE(p.Observe(0, true, kCompute, 3, &changes).ok());
  EXPECT_TRUE(changes.empty());
  ASSERT_TRUE(p.Observe(0, true, kCompute, 4, &changes).ok());
  EXPECT_EQ(changes, (std::vector<Change>{{0, true, 4}}));
}

TEST(AmpPolicy, TurnsOffOnlyAfterDisableAfterConsecutiveRecoveredObservations) {
  AmpPolicy p(AmpOptions{.disable_after = 3});
  std::vector<Change> changes;
  ASSERT_TRUE(p.Observe(1, true, kCompute, 0, &changes).ok());
  ASSERT_TRUE(p.Observe(1, false, kCompute, 1, &changes).ok());
  ASSERT_TRUE(p.Observe(1, false, kCompute, 2, &changes).ok());
  EXPECT_TRUE(p.Enabled(1));
  ASSERT_TRUE(p.Observe(1, false, kCompute, 3, &changes).ok());
  EXPECT_FALSE(p.Enabled(1));
  EXPECT_EQ(changes, (std::vector<Change>{{1, true, 0}, {1, false, 3}}));
}

TEST(AmpPolicy, BriefRecoveriesDoNotFlap) {
  // Straggle, recover briefly, straggle again, repeatedly: AMP stays on throughout.
  AmpPolicy p(AmpOptions{.disable_after = 5});
  std::vector<Change> changes;
  int64_t it = 0;
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(p.Observe(0, true, kCompute, it++, &changes).ok());
    for (int k = 0; k < 4; ++k) ASSERT_TRUE(p.Observe(0, false, kCompute, it++, &changes).ok());
  }
  EXPECT_EQ(changes, (std::vector<Change>{{0, true, 0}}));
  EXPECT_TRUE(p.Enabled(0));
}

TEST(AmpPolicy, CommunicationStragglerNeverGetsAmp) {
  AmpPolicy p(AmpOptions{});
  std::vector<Change> changes;
  for (int64_t it = 0; it < 50; ++it) ASSERT_TRUE(p.Observe(3, true, kComm, it, &changes).ok());
  EXPECT_TRUE(changes.empty());
  EXPECT_FALSE(p.Enabled(3));
}

TEST(AmpPolicy, CauseTurningToCommunicationCountsTowardsSwitchingOff) {
  AmpPolicy p(AmpOptions{.disable_after = 2});
  std::vector<Change> changes;
  ASSERT_TRUE(p.Observe(0, true, kCompute, 0, &changes).ok());
  ASSERT_TRUE(p.Observe(0, true, kComm, 1, &changes).ok());
  EXPECT_TRUE(p.Enabled(0));
  ASSERT_TRUE(p.Observe(0, true, kComm, 2, &changes).ok());
  EXPECT_FALSE(p.Enabled(0));
  EXPECT_EQ(changes, (std::vector<Change>{{0, true, 0}, {0, false, 2}}));
}

TEST(AmpPolicy, DisabledPolicyNeverTurnsAmpOn) {
  AmpPolicy p(AmpOptions{.enabled = false});
  std::vector<Change> changes;
  for (int64_t it = 0; it < 20; ++it) ASSERT_TRUE(p.Observe(0, true, kCompute, it, &changes).ok());
  EXPECT_TRUE(changes.empty());
  EXPECT_FALSE(p.Enabled(0));
}

TEST(AmpPolicy, WorkersAreIndependent) {
  AmpPolicy p(AmpOptions{});
  std::vector<Change> changes;
  ASSERT_TRUE(p.Observe(0, true, kCompute, 7, &changes).ok());
  ASSERT_TRUE(p.Observe(1, false, kCompute, 7, &changes).ok());
  EXPECT_TRUE(p.Enabled(0));
  EXPECT_FALSE(p.Enabled(1));
  EXPECT_FALSE(p.Enabled(99));
  p.Forget(0);
  EXPECT_FALSE(p.Enabled(0));
  EXPECT_EQ(changes.size(), 1u);
}

TEST(AmpPolicy, RejectsBadObservationsAndOptions) {
  AmpPolicy p(AmpOptions{});
  EXPECT_EQ(p.Observe(-1, true, kCompute, 0, nullptr).message(), "worker: must be >= 0, got -1");
  ASSERT_TRUE(p.Observe(0, false, kCompute, 10, nullptr).ok());
  EXPECT_EQ(p.Observe(0, true, kCompute, 9, nullptr).message(),
            "iteration: must not go backwards for worker 0, got 9 after 10");
  EXPECT_FALSE(p.Enabled(0));
  EXPECT_EQ(AmpPolicy::Create(AmpOptions{.enable_after = 0}).status().message(),
            "enable_after: must be >= 1, got 0");
  EXPECT_EQ(Validate(AmpOptions{.disable_after = -2}).message(), "disable_after: must be >= 1, got -2");
  EXPECT_TRUE(AmpPolicy::Create(AmpOptions{}).ok());
}

}  // namespace
}  // namespace star::amp
