#include "sim/worker_model.h"

#include <gtest/gtest.h>

namespace star::sim {
namespace {

Scenario Base() {
  Scenario s;
  s.workers = 4;
  s.batch_per_worker = 32;
  s.compute_seconds_per_sample = 0.002;
  s.communication_seconds = 0.05;
  return s;
}

TEST(WorkerModel, ComputeIsLinearInTheBatchAndAmpDividesIt) {
  Scenario s = Base();
  s.amp_speedup = 1.6;
  WorkerModel m(s);
  EXPECT_DOUBLE_EQ(m.Compute(0, 0, 0, 32, false), 0.064);
  EXPECT_DOUBLE_EQ(m.Compute(0, 0, 0, 64, false), 0.128);
  EXPECT_DOUBLE_EQ(m.Compute(0, 0, 0, 32, true), 0.064 / 1.6);
  EXPECT_DOUBLE_EQ(m.Communication(0, 0, 0), 0.05);
  EXPECT_DOUBLE_EQ(m.Compute(0, 0, 0, 32, false, Overhead{1.5, 2}), 0.096);
  EXPECT_DOUBLE_EQ(m.Communication(0, 0, 0, Overhead{1.5, 2}), 0.1);
}

TEST(WorkerModel, EpisodesSlowTheirWorkerOnlyWhileActive) {
  Scenario s = Base();
  s.episodes.push_back({.worker = 1, .start = 10, .end = 20, .cpu = 0.5, .bandwidth = {}, .delay = {}, .peer = {}});
  s.episodes.push_back({.worker = 1, .start = 15, .end = {}, .cpu = {}, .bandwidth = 0.25, .delay = {}, .peer = {}});
  WorkerModel m(s);
  EXPECT_DOUBLE_EQ(m.Compute(1, 0, 9.99, 32, false), 0.064);
  EXPECT_DOUBLE_EQ(m.Compute(1, 0, 10, 32, false), 0.128);
  EXPECT_DOUBLE_EQ(m.Compute(1, 0, 20, 32, false), 0.064);  // end is exclusive
  EXPECT_DOUBLE_EQ(m.Compute(0, 0, 12, 32, false), 0.064);  // another worker
  EXPECT_DOUBLE_EQ(m.Communication(1, 0, 14, {}), 0.05);
  EXPECT_DOUBLE_EQ(m.Communication(1, 0, 1e9, {}), 0.2);  // no end: to the end of the run
  EXPECT_DOUBLE_EQ(m.CpuFraction(1, 16), 0.5);
  EXPECT_DOUBLE_EQ(m.BandwidthFraction(1, 16), 0.25);
}

TEST(WorkerModel, OverlappingEpisodesMultiply) {
  Scenario s = Base();
  s.episodes.push_back({.worker = 2, .start = 0, .end = {}, .cpu = 0.5, .bandwidth = {}, .delay = {}, .peer = {}});
  s.episodes.push_back({.worker = 2, .start = 0, .end = {}, .cpu = 0.5, .bandwidth = {}, .delay = {}, .peer = {}});
  WorkerModel m(s);
  EXPECT_DOUBLE_EQ(m.CpuFraction(2, 1), 0.25);
}

TEST(WorkerModel, JitterIsAFunctionOfSeedWorkerAndStepWithMeanOne) {
  Scenario s = Base();
  s.jitter = 0.1;
  WorkerModel a(s), b(s);
  s.seed = 2;
  WorkerModel c(s);
  EXPECT_EQ(a.Compute(3, 17, 5, 32, false), b.Compute(3, 17, 5, 32, false));
  EXPECT_NE(a.Compute(3, 17, 5, 32, false), a.Compute(3, 18, 5, 32, false));
  EXPECT_NE(a.Compute(3, 17, 5, 32, false), a.Compute(2, 17, 5, 32, false));
  EXPECT_NE(a.Compute(3, 17, 5, 32, false), c.Compute(3, 17, 5, 32, false));
  EXPECT_NE(a.Compute(3, 17, 5, 32, false) / 0.064, a.Communication(3, 17, 5) / 0.05);
  double sum = 0, sq = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double f = a.Compute(0, i, 0, 32, false) / 0.064;
    EXPECT_GT(f, 0);
    sum += f;
    sq += f * f;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 1, 0.005);
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 0.1, 0.005);
}

}  // namespace
}  // namespace star::sim
