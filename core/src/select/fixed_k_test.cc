#include "star/core/select/fixed_k.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "select/fixed_k_internal.h"
#include "star/core/converge/updates_factor.h"

namespace star::select {
namespace {

std::vector<double> DistinctRandomTimes(std::mt19937_64& rng, int n) {
  std::uniform_real_distribution<double> u(0.1, 1.0);
  std::vector<double> t(n);
  for (double& x : t) x = u(rng);
  if (rng() % 3 == 0) t[rng() % n] *= 4;  // a straggler
  return t;
}

TEST(SimulateFixedK, KEqualsNGivesTheSlowestTime) {
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 32);
    const std::vector<double> t = DistinctRandomTimes(rng, n);
    const double t_max = *std::max_element(t.begin(), t.end());
    EXPECT_NEAR(FixedKInterval(t, n, 1000), t_max, 1e-12 * t_max) << "n=" << n;
  }
}

TEST(SimulateFixedK, KEqualsOneApproachesTheAsgdRate) {
  std::mt19937_64 rng(2);
  constexpr int kUpdates = 2000;
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 16);
    const std::vector<double> t = DistinctRandomTimes(rng, n);
    double rate = 0;
    for (double x : t) rate += 1 / x;
    const double asgd = 1 / rate;
    // Documented bound: within a relative n / updates (the unfinished last round).
    const double interval = FixedKInterval(t, 1, kUpdates);
    EXPECT_NEAR(interval, asgd, asgd * (static_cast<double>(n) / kUpdates + 1e-9)) << "n=" << n;
  }
}

TEST(SimulateFixedK, IntervalIsNonDecreasingInK) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 150; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 15);
    const std::vector<double> t = DistinctRandomTimes(rng, n);
    double previous = 0;
    for (int k = 1; k <= n; ++k) {
      const double interval = FixedKInterval(t, k, 500);
      EXPECT_GE(interval, previous) << "trial " << trial << " k=" << k;
      previous = interval;
    }
  }
}

TEST(SimulateFixedK, EqualTimesBehaveLikeSsgdForEveryK) {
  const std::vector<double> t(6, 0.25);
  for (int k = 1; k <= 6; ++k) {
    const FixedKSimulation sim = SimulateFixedK(t, k, 100);
    EXPECT_DOUBLE_EQ(sim.interval_seconds, 0.25) << "k=" << k;
    EXPECT_DOUBLE_EQ(sim.mean_contributions, 6) << "k=" << k;
    EXPECT_EQ(sim.max_staleness, 0) << "k=" << k;
  }
}

TEST(SimulateFixedK, LateGradientJoinsTheNextUpdateInsteadOfBeingDropped) {
  // Three workers at 1 s, one at 3 s, k = 3: updates at 1, 2 and 3 s. The straggler's
  // gradient (started on version 0) arrives at 3 s with the fast ones and is summed by
  // update 3, having missed two versions: 3 + 3 + 4 gradients.
  const FixedKSimulation sim = SimulateFixedK({1, 1, 3, 1}, 3, 3);
  EXPECT_DOUBLE_EQ(sim.interval_seconds, 1.0);
  EXPECT_DOUBLE_EQ(sim.mean_contributions, 10.0 / 3);
  EXPECT_EQ(sim.max_staleness, 2);
  EXPECT_DOUBLE_EQ(sim.mean_staleness, 2.0 / 10);
  EXPECT_EQ(sim.arrivals, 10);
}

TEST(SimulateFixedK, SumsEverySimulatedGradient) {
  std::mt19937_64 rng(4);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 20);
    const std::vector<double> t = DistinctRandomTimes(rng, n);
    const int k = 1 + static_cast<int>(rng() % n);
    const FixedKSimulation sim = SimulateFixedK(t, k, 200);
    EXPECT_EQ(sim.updates, 200);
    EXPECT_NEAR(sim.mean_contributions * sim.updates, static_cast<double>(sim.arrivals), 1e-6);
    EXPECT_GE(sim.mean_contributions, k);
  }
}

TEST(SimulateFixedK, StopsAfterMaxArrivalsButCompletesOneUpdate) {
  const std::vector<double> t = {1, 1.1, 1.2, 1.3};
  const FixedKSimulation capped = SimulateFixedK(t, 4, 1000, 10);
  EXPECT_LT(capped.updates, 1000);
  EXPECT_GE(capped.arrivals, 10);
  EXPECT_DOUBLE_EQ(capped.interval_seconds, 1.3);
  const FixedKSimulation tiny = SimulateFixedK(t, 4, 1000, 1);
  EXPECT_EQ(tiny.updates, 1);
}

TEST(SimulateFixedK, HeapAndScanLoopsAgreeExactly) {
  using internal::FixedKLoop;
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<double> t = DistinctRandomTimes(rng, n);
    if (trial % 4 == 0 && n > 3) t[2] = t[1] = t[0];  // simultaneous arrivals
    const int k = 1 + static_cast<int>(rng() % n);
    const int updates = 1 + static_cast<int>(rng() % 300);
    const int64_t cap = trial % 3 == 0 ? 50 : 1 << 30;
    const FixedKSimulation a = internal::SimulateFixedKWith(FixedKLoop::kHeap, t, k, updates, cap);
    const FixedKSimulation b = internal::SimulateFixedKWith(FixedKLoop::kScan, t, k, updates, cap);
    EXPECT_EQ(a.interval_seconds, b.interval_seconds) << "trial " << trial;
    EXPECT_EQ(a.mean_contributions, b.mean_contributions) << "trial " << trial;
    EXPECT_EQ(a.mean_staleness, b.mean_staleness) << "trial " << trial;
    EXPECT_EQ(a.max_staleness, b.max_staleness) << "trial " << trial;
    EXPECT_EQ(a.updates, b.updates) << "trial " << trial;
    EXPECT_EQ(a.arrivals, b.arrivals) << "trial " << trial;
  }
}

TEST(FixedKMeanField, IsExactAtKEqualsNAndKEqualsOne) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 64);
    const std::vector<double> t = DistinctRandomTimes(rng, n);
    double rate = 0;
    for (double x : t) rate += 1 / x;
    const double t_max = *std::max_element(t.begin(), t.end());
    EXPECT_NEAR(FixedKMeanField(t, n).interval_seconds, t_max, 1e-12 * t_max);
    const FixedKSimulation one = FixedKMeanField(t, 1);
    EXPECT_NEAR(one.interval_seconds, 1 / rate, 1e-12 / rate);
    EXPECT_NEAR(one.mean_contributions, 1.0, 1e-9);
  }
}

TEST(FixedKMeanField, IsNonDecreasingInKAndCountsArrivals) {
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 128);
    const std::vector<double> t = DistinctRandomTimes(rng, n);
    double rate = 0;
    for (double x : t) rate += 1 / x;
    double previous = 0;
    for (int k = 1; k <= n; ++k) {
      const FixedKSimulation m = FixedKMeanField(t, k);
      EXPECT_GE(m.interval_seconds, previous) << "n=" << n << " k=" << k;
      EXPECT_NEAR(m.mean_contributions, m.interval_seconds * rate, 1e-9 * m.mean_contributions);
      EXPECT_GE(m.mean_contributions, k - 1e-9);  // at least k distinct workers per round
      previous = m.interval_seconds;
    }
  }
}

TEST(FixedKMeanField, AgreesWithALongSimulationOnLargeVariedJobs) {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> base(0.9, 1.1), slow(2.0, 3.0);
  for (int trial = 0; trial < 4; ++trial) {
    const int n = 128;
    std::vector<double> t(n);
    for (double& x : t) x = base(rng);
    for (int j = 0; j < n / 20; ++j) t[rng() % n] *= slow(rng);
    for (int k : {n / 10, n / 4, n / 2, (3 * n) / 4}) {
      const double sim = SimulateFixedK(t, k, 4000).interval_seconds;
      EXPECT_NEAR(FixedKMeanField(t, k).interval_seconds, sim, 0.05 * sim) << "k=" << k;
    }
  }
}

TEST(FixedKSecondsPerProgress, IsIntervalTimesFactorOfSummedBatch) {
  FixedKSimulation sim;
  sim.interval_seconds = 2;
  sim.mean_contributions = 4;
  EXPECT_DOUBLE_EQ(FixedKSecondsPerProgress(sim, 8, 64), 2 * converge::UpdatesFactor(32, 64));
}

}  // namespace
}  // namespace star::select
