#include "sim/pipeline_run.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/simulator.h"

namespace star::sim {
namespace {

using local::Policy;

// Four stages of each replica, 8 micro-batches, stage costs alike. 600 iterations to the
// target in clean conditions.
Scenario Pipeline(int replicas = 1) {
  Scenario s;
  s.workers = 4 * replicas;
  s.batch_per_worker = 256;
  s.noise_scale = 256;
  s.min_updates = 300;
  s.communication_seconds = 0.01;
  s.jitter = 0.03;
  s.seed = 3;
  s.pipeline = PipelineScenario{.stages = 4,
                                .micro_batches = 8,
                                .max_in_flight = {},
                                .forward_seconds = {0.004, 0.004, 0.004, 0.004},
                                .backward_seconds = {0.008, 0.008, 0.008, 0.008},
                                .activation_seconds = 0.0001,
                                .gradient_seconds = 0.0001,
                                .outside_seconds = 0.02};
  return s;
}

// The link between workers a and a + 1 delayed `delay` seconds from `start` to `end`.
Episode Delayed(int a, double delay, double start, std::optional<double> end = {}) {
  Episode e;
  e.worker = a;
  e.start = start;
  e.end = end;
  e.delay = delay;
  e.peer = a + 1;
  return e;
}

SimResult Sim(const Scenario& s, Policy p, std::ostream* trace = nullptr) {
  SimOptions o;
  o.trace = trace;
  auto r = Simulate(s, p, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

std::vector<const op::TimelineEvent*> Schedules(const SimResult& r) {
  std::vector<const op::TimelineEvent*> out;
  for (const op::TimelineEvent& e : r.timeline) {
    if (e.kind == op::EventKind::kSchedule) out.push_back(&e);
  }
  return out;
}

TEST(SimulatePipeline, CleanLinksKeepStaticOneFOneBAtTheModelsTime) {
  Scenario s = Pipeline();
  s.jitter = 0;
  const SimResult ssgd = Sim(s, Policy::kSsgd), autop = Sim(s, Policy::kAuto);
  EXPECT_TRUE(ssgd.pipeline);
  EXPECT_EQ(autop.decisions, 0);
  EXPECT_FALSE(autop.adapted_iteration_seconds);
  const auto model = pipeline::IterationSeconds(CleanCosts(*s.pipeline), {4, 3, 2, 1});
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE(ssgd.static_iteration_seconds);
  EXPECT_DOUBLE_EQ(*ssgd.static_iteration_seconds, *model + 0.02);
  ASSERT_TRUE(ssgd.tta_seconds && autop.tta_seconds);
  EXPECT_DOUBLE_EQ(*autop.tta_seconds, *ssgd.tta_seconds);
  EXPECT_EQ(ssgd.updates, ssgd.iterations);  // one update per iteration
}

TEST(SimulatePipeline, IsDeterministicForASeedAndTracesEveryStage) {
  Scenario s = Pipeline();
  s.episodes.push_back(Delayed(1, 0.03, 5));
  std::ostringstream t1, t2;
  const SimResult a = Sim(s, Policy::kAuto, &t1), b = Sim(s, Policy::kAuto, &t2);
  EXPECT_EQ(ToJson(a), ToJson(b));
  const std::string trace = t1.str();
  EXPECT_EQ(trace, t2.str());
  EXPECT_EQ(std::count(trace.begin(), trace.end(), '\n'), 4 * a.iterations);
  Scenario other = s;
  other.seed = 4;
  EXPECT_NE(Sim(other, Policy::kAuto).tta_seconds, a.tta_seconds);
}

TEST(SimulatePipeline, TheLoopsDepthsAbsorbADelayedLinkAsTheModelPredicts) {
  Scenario s = Pipeline();
  s.episodes.push_back(Delayed(1, 0.03, 5));
  const SimResult ssgd = Sim(s, Policy::kSsgd), autop = Sim(s, Policy::kAuto);
  EXPECT_EQ(ssgd.decisions, 0);
  const auto events = Schedules(autop);
  ASSERT_FALSE(events.empty());
  const op::TimelineEvent& adopted = *events.front();
  EXPECT_EQ(adopted.schedule.slow_link, 1) << "the link between stages 1 and 2";
  EXPECT_GT(adopted.schedule.warmup[1], 3) << "deeper than 1F1B ahead of the link";
  ASSERT_TRUE(ssgd.static_iteration_seconds && autop.adapted_iteration_seconds);
  EXPECT_LT(*autop.adapted_iteration_seconds, *ssgd.static_iteration_seconds);
  ASSERT_TRUE(ssgd.tta_seconds && autop.tta_seconds);
  EXPECT_LT(*autop.tta_seconds, *ssgd.tta_seconds);
}

// Without jitter the loop's costs are the simulation's, and its prediction (the model's
// time for the depths plus the work outside the schedule) is what the iterations take.
TEST(SimulatePipeline, WithoutJitterTheIterationsTakeWhatTheLoopPredicted) {
  Scenario s = Pipeline();
  s.jitter = 0;
  s.episodes.push_back(Delayed(1, 0.03, 0));
  const SimResult r = Sim(s, Policy::kAuto);
  const auto events = Schedules(r);
  ASSERT_FALSE(events.empty());
  ASSERT_TRUE(r.adapted_iteration_seconds);
  EXPECT_NEAR(*r.adapted_iteration_seconds, events.back()->schedule.predicted_seconds, 1e-9);
  pipeline::PipelineCosts delayed = CleanCosts(*s.pipeline);
  delayed.links[1].activation_latency_seconds = delayed.links[1].gradient_latency_seconds = 0.03;
  const auto model = pipeline::IterationSeconds(delayed, events.back()->schedule.warmup);
  ASSERT_TRUE(model.ok());
  EXPECT_NEAR(*r.adapted_iteration_seconds, *model + s.pipeline->outside_seconds, 1e-9);
}

TEST(SimulatePipeline, TheDepthsGoWhenTheLinkRecovers) {
  Scenario s = Pipeline();
  s.jitter = 0;
  s.episodes.push_back(Delayed(1, 0.03, 2, 12));
  const SimResult r = Sim(s, Policy::kAuto);
  const auto events = Schedules(r);
  ASSERT_GE(events.size(), 2u);
  EXPECT_FALSE(events.front()->schedule.warmup.empty());
  EXPECT_GT(events.front()->t, 2);
  EXPECT_TRUE(events.back()->schedule.warmup.empty()) << "back to static 1F1B";
  EXPECT_GT(events.back()->t, 12);
}

TEST(SimulatePipeline, OneReplicaOfAHybridJobAdaptsAndTheReplicasAllReduce) {
  Scenario s = Pipeline(2);
  s.episodes.push_back(Delayed(5, 0.03, 5));  // replica 1's link between stages 1 and 2
  const SimResult ssgd = Sim(s, Policy::kSsgd), autop = Sim(s, Policy::kAuto);
  const auto events = Schedules(autop);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front()->schedule.slow_link, 1);
  ASSERT_TRUE(ssgd.static_iteration_seconds && autop.adapted_iteration_seconds);
  EXPECT_LT(*autop.adapted_iteration_seconds, *ssgd.static_iteration_seconds);
  Scenario one = Pipeline(1);
  one.jitter = s.jitter = 0;
  one.episodes.clear();
  s.episodes.clear();
  ASSERT_TRUE(Sim(s, Policy::kSsgd).static_iteration_seconds && Sim(one, Policy::kSsgd).static_iteration_seconds);
  EXPECT_DOUBLE_EQ(*Sim(s, Policy::kSsgd).static_iteration_seconds,
                   *Sim(one, Policy::kSsgd).static_iteration_seconds + s.communication_seconds);
}

TEST(SimulatePipeline, ACpuStragglerStageSlowsEveryIterationUnderAnySchedule) {
  Scenario s = Pipeline();
  s.jitter = 0;
  Scenario slow = s;
  slow.episodes.push_back({.worker = 2, .start = 0, .end = {}, .cpu = 0.25, .bandwidth = {}, .delay = {}, .peer = {}});
  const SimResult clean = Sim(s, Policy::kSsgd), contended = Sim(slow, Policy::kSsgd);
  ASSERT_TRUE(clean.static_iteration_seconds && contended.static_iteration_seconds);
  // Stage 2 runs its 8 forwards and backwards of 4 + 8 ms at a quarter of the speed.
  EXPECT_GE(*contended.static_iteration_seconds, 8 * 0.012 / 0.25 + s.pipeline->outside_seconds);
  EXPECT_LT(*clean.static_iteration_seconds, 8 * 0.012 / 0.25);
}

}  // namespace
}  // namespace star::sim
