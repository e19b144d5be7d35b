#include "star/core/select/estimate.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace star::select {
namespace {

using api::Architecture;
using api::SyncMode;

SelectionInput Input(std::vector<double> t) {
  SelectionInput in;
  in.architecture = Architecture::kParameterServer;
  in.batch_per_worker = 32;
  in.noise_scale = 500;
  in.iteration_seconds = std::move(t);
  return in;
}

// Each of Select()'s candidates, scored again on its own, gives Select's estimate:
// the two never rank one setting by different numbers.
TEST(EstimateSecondsPerProgress, AgreesWithEverySelectCandidate) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> fast(0.1, 0.12), slow(0.3, 0.6);
  int fixed_k = 0, groups = 0, asgd = 0;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> t(12);
    const size_t slow_workers = static_cast<size_t>(3 + trial % 4);
    for (size_t i = 0; i < t.size(); ++i) t[i] = i < slow_workers ? slow(rng) : fast(rng);
    const SelectionInput in = Input(t);
    StatusOr<Selection> sel = Select(in);
    ASSERT_TRUE(sel.ok()) << sel.status();
    for (const Candidate& c : sel.value().candidates) {
      StatusOr<double> e = EstimateSecondsPerProgress(in, c.mode, c.k, c.groups);
      ASSERT_TRUE(e.ok()) << e.status();
      EXPECT_DOUBLE_EQ(e.value(), c.estimated_seconds_per_progress) << ToJson(c).dump();
      fixed_k += c.mode == SyncMode::kFixedK;
      groups += c.mode == SyncMode::kGroups;
      asgd += c.mode == SyncMode::kAsgd;
    }
  }
  EXPECT_GT(fixed_k, 0);
  EXPECT_GT(groups, 0);
  EXPECT_GT(asgd, 0);
}

// With equal times every round of fixed_k at k = n sums each worker's gradient once:
// SSGD's updates.
TEST(EstimateSecondsPerProgress, FixedKOfEveryoneWithEqualTimesIsSsgd) {
  const SelectionInput in = Input({0.2, 0.2, 0.2, 0.2});
  StatusOr<double> all = EstimateSecondsPerProgress(in, SyncMode::kFixedK, 4, {});
  StatusOr<double> ssgd = EstimateSecondsPerProgress(in, SyncMode::kSsgd, 0, {});
  ASSERT_TRUE(all.ok() && ssgd.ok());
  EXPECT_DOUBLE_EQ(all.value(), ssgd.value());
}

TEST(EstimateSecondsPerProgress, RejectsABadSettingNamingTheField) {
  const SelectionInput in = Input({0.1, 0.2, 0.15});
  StatusOr<double> k0 = EstimateSecondsPerProgress(in, SyncMode::kFixedK, 0, {});
  ASSERT_FALSE(k0.ok());
  EXPECT_EQ(k0.status().message(), "k: must be in [1, 3], got 0");
  StatusOr<double> k4 = EstimateSecondsPerProgress(in, SyncMode::kFixedK, 4, {});
  EXPECT_FALSE(k4.ok());
  StatusOr<double> none = EstimateSecondsPerProgress(in, SyncMode::kGroups, 3, {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "groups: must not be empty");
  StatusOr<double> empty = EstimateSecondsPerProgress(in, SyncMode::kGroups, 3, {{0, 1}, {}});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "groups[1]: must not be empty");
  StatusOr<double> outside = EstimateSecondsPerProgress(in, SyncMode::kGroups, 3, {{0, 1}, {3}});
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().message(), "groups[1]: worker 3 is not in [0, 3)");
  SelectionInput bad = in;
  bad.batch_per_worker = 0;
  StatusOr<double> input = EstimateSecondsPerProgress(bad, SyncMode::kSsgd, 3, {});
  ASSERT_FALSE(input.ok());
  EXPECT_EQ(input.status().message().rfind("batch_per_worker:", 0), 0u);
}

}  // namespace
}  // namespace star::select
