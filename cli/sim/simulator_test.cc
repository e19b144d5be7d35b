#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <sstream>

namespace star::sim {
namespace {

using local::Policy;

// A small job: 16 workers, SSGD needs 400 iterations in clean conditions.
Scenario Small(double jitter = 0.05) {
  Scenario s;
  s.workers = 16;
  s.batch_per_worker = 32;
  s.noise_scale = 512;
  s.min_updates = 200;
  s.compute_seconds_per_sample = 0.002;
  s.communication_seconds = 0.05;
  s.jitter = jitter;
  s.seed = 7;
  return s;
}

SimResult Sim(const Scenario& s, Policy p, std::ostream* trace = nullptr) {
  SimOptions o;
  o.trace = trace;
  auto r = Simulate(s, p, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

TEST(Simulate, IsDeterministicForASeed) {
  Scenario s = Small();
  s.episodes.push_back({.worker = 3, .start = 5, .end = 30, .cpu = 0.3, .bandwidth = {}, .delay = {}, .peer = {}});
  for (Policy p : {Policy::kAuto, Policy::kAsgd, Policy::kFixedK}) {
    std::ostringstream t1, t2;
    const SimResult a = Sim(s, p, &t1), b = Sim(s, p, &t2);
    EXPECT_EQ(ToJson(a), ToJson(b)) << local::ToString(p);
    EXPECT_EQ(t1.str(), t2.str()) << local::ToString(p);
    EXPECT_FALSE(t1.str().empty());
  }
  Scenario other = s;
  other.seed = 8;
  EXPECT_NE(Sim(s, Policy::kSsgd).tta_seconds, Sim(other, Policy::kSsgd).tta_seconds);
}

TEST(Simulate, ASlowLinkIsNamedAsItsWorkersCommunicationAndAutoBeatsSsgd) {
  Scenario s = Small();
  s.episodes.push_back({.worker = 6, .start = 5, .end = {}, .cpu = {}, .bandwidth = 0.2, .delay = {}, .peer = {}});
  const SimResult ssgd = Sim(s, Policy::kSsgd), autop = Sim(s, Policy::kAuto);
  ASSERT_TRUE(ssgd.tta_seconds && autop.tta_seconds);
  std::vector<int> flagged;
  for (const op::TimelineEvent& e : autop.timeline) {
    if (e.kind != op::EventKind::kStraggler) continue;
    flagged.push_back(e.worker);
    EXPECT_EQ(e.straggler.cause, api::StragglerCause::kCommunication);
  }
  EXPECT_EQ(flagged, std::vector<int>(flagged.size(), 6));  // only the slow link's worker
  ASSERT_FALSE(flagged.empty());
  // Nothing to reallocate in the simulator: after a detection window the mode leaves the
  // slow link's worker out of the ring.
  EXPECT_LT(*autop.tta_seconds, *ssgd.tta_seconds);
}

TEST(Simulate, WithoutEpisodesEveryPolicyButAsgdMatchesSsgd) {
  const Scenario s = Small();
  const SimResult ssgd = Sim(s, Policy::kSsgd);
  ASSERT_TRUE(ssgd.tta_seconds);
  EXPECT_EQ(ssgd.decisions, 0);
  for (Policy p : {Policy::kAuto, Policy::kFixedK, Policy::kGroups, Policy::kAmp, Policy::kBoa}) {
    const SimResult r = Sim(s, p);
    ASSERT_TRUE(r.tta_seconds) << local::ToString(p);
    EXPECT_NEAR(*r.tta_seconds / *ssgd.tta_seconds, 1, 0.05) << local::ToString(p);
  }
  const SimResult asgd = Sim(s, Policy::kAsgd);
  ASSERT_TRUE(asgd.tta_seconds);
  EXPECT_GT(*asgd.tta_seconds, *ssgd.tta_seconds);  // staleness and its extra CPU/bandwidth
}

TEST(Simulate, OneStaticStragglerScalesSsgdWithItsSlowdown) {
  const Scenario clean = Small(/*jitter=*/0);
  const SimResult base = Sim(clean, Policy::kSsgd);
  ASSERT_TRUE(base.tta_seconds);
  // Exactly the iterations the target needs, each as long as the slowest worker's.
  const double compute = 32 * 0.002, comm = 0.05;
  EXPECT_NEAR(*base.tta_seconds, static_cast<double>(base.updates) * (compute + comm), 1e-6);
  for (double slowdown : {2.0, 4.0}) {
    Scenario s = clean;
    s.episodes.push_back({.worker = 5, .start = 0, .end = {}, .cpu = 1 / slowdown, .bandwidth = {}, .delay = {}, .peer = {}});
    const SimResult r = Sim(s, Policy::kSsgd);
    ASSERT_TRUE(r.tta_seconds);
    EXPECT_EQ(r.updates, base.updates);
    EXPECT_NEAR(*r.tta_seconds / *base.tta_seconds, (slowdown * compute + comm) / (compute + comm),
                1e-9)
        << slowdown;
  }
}

TEST(Simulate, FixedKLeavesAStaticStragglerBehind) {
  Scenario s = Small();
  s.episodes.push_back({.worker = 5, .start = 0, .end = {}, .cpu = 0.25, .bandwidth = {}, .delay = {}, .peer = {}});
  const SimResult ssgd = Sim(s, Policy::kSsgd), fixed_k = Sim(s, Policy::kFixedK);
  ASSERT_TRUE(ssgd.tta_seconds && fixed_k.tta_seconds);
  EXPECT_GE(fixed_k.decisions, 1);
  EXPECT_LT(*fixed_k.tta_seconds, *ssgd.tta_seconds);
}

// SGD with momentum m moves 1 / (1 - m) times its gradient per update once it is at
// speed; from the start it is there only geometrically, which costs about m / (1 - m)
// updates.
TEST(Simulate, MomentumCostsAboutMOverOneMinusMUpdatesFromTheStart) {
  Scenario s = Small(/*jitter=*/0);
  const SimResult without = Sim(s, Policy::kSsgd);
  s.momentum = 0.9;
  const SimResult with = Sim(s, Policy::kSsgd);
  EXPECT_GE(with.updates - without.updates, 9);
  EXPECT_LE(with.updates - without.updates, 10);
}

// With group replicas, rank 0's copy learns from its own group only until the next
// switch, so groups beside a straggler reach the target later than when every group's
// updates count for one model.
TEST(Simulate, GroupReplicasJudgeTheTargetOnRankZerosCopy) {
  Scenario s = Small(/*jitter=*/0);
  s.episodes.push_back({.worker = 5, .start = 0, .end = {}, .cpu = 0.25, .bandwidth = {}, .delay = {}, .peer = {}});
  const SimResult shared = Sim(s, Policy::kGroups);
  s.group_replicas = true;
  const SimResult replicas = Sim(s, Policy::kGroups);
  ASSERT_TRUE(shared.tta_seconds && replicas.tta_seconds);
  EXPECT_GE(replicas.decisions, 1);
  EXPECT_GT(*replicas.tta_seconds, *shared.tta_seconds);
}

// Without AMP the loop runs as `star local` does on a CPU without native bf16: policy
// amp cannot turn it on, so it runs as SSGD does.
TEST(Simulate, WithoutAmpPolicyAmpRunsAsSsgd) {
  Scenario s = Small(/*jitter=*/0);
  s.episodes.push_back({.worker = 5, .start = 0, .end = {}, .cpu = 0.25, .bandwidth = {}, .delay = {}, .peer = {}});
  const SimResult ssgd = Sim(s, Policy::kSsgd);
  ASSERT_TRUE(ssgd.tta_seconds);
  EXPECT_LT(*Sim(s, Policy::kAmp).tta_seconds, *ssgd.tta_seconds) << "AMP helps when it can";
  s.amp_available = false;
  const SimResult amp = Sim(s, Policy::kAmp);
  EXPECT_EQ(amp.decisions, 0);
  EXPECT_EQ(amp.tta_seconds, ssgd.tta_seconds);
}

TEST(JobSpecOf, TakesTheScenariosDetectionWindow) {
  Scenario s = Small();
  EXPECT_EQ(JobSpecOf(s).mitigation.detection.window, api::TrainingJobSpec{}.mitigation.detection.window);
  s.detection_window = 10;
  EXPECT_EQ(JobSpecOf(s).mitigation.detection.window, 10);
}

TEST(Simulate, ATargetOutOfReachReportsNull) {
  Scenario s = Small();
  s.max_seconds = 1;
  const SimResult r = Sim(s, Policy::kSsgd);
  EXPECT_FALSE(r.tta_seconds);
  EXPECT_GT(r.updates, 0);
  EXPECT_TRUE(ToJson(r)["tta_seconds"].is_null());
}

TEST(Simulate, ResultJsonHasTheContractFields) {
  const SimResult r = Sim(Small(), Policy::kAmp);
  const nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["policy"], "amp");
  EXPECT_TRUE(j["tta_seconds"].is_number());
  EXPECT_EQ(j["updates"], r.updates);
  EXPECT_EQ(j["iterations"], r.iterations);
  EXPECT_EQ(j["decisions"], r.decisions);
  EXPECT_EQ(j.size(), 5u);
}

}  // namespace
}  // namespace star::sim
