// The detector's step path (DetectorOptions::step_slowdown): a large step is flagged
// within step_samples samples, by every rule, and nothing else changes.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "detect/trace_for_test.h"
#include "star/core/detect/detector.h"

namespace star::detect {
namespace {

using api::StragglerCause;
using api::StragglerKind;
using testing::Describe;
using testing::Episode;
using testing::MakeTrace;
using testing::RunDetector;
using testing::RunStepEpisode;
using testing::TraceSpec;

DetectorOptions WithRule(Rule rule, double step_slowdown = DetectorOptions{}.step_slowdown) {
  DetectorOptions o;
  o.rule = rule;
  o.step_slowdown = step_slowdown;
  return o;
}

class StepPath : public ::testing::TestWithParam<Rule> {};

TEST_P(StepPath, FlagsALargeStepInItsSecondSampleAndReportsItsRecovery) {
  // 2x or 3x compute of an 80/20 split is 1.8x or 2.6x the typical total: two slow
  // samples flag it. Its recovery comes once its window holds the fast samples again.
  for (double factor : {2.0, 3.0}) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      SCOPED_TRACE("factor " + std::to_string(factor) + " seed " + std::to_string(seed));
      const std::vector<Event> events = RunStepEpisode(WithRule(GetParam()), factor, seed);
      ASSERT_EQ(events.size(), 2u) << Describe(events);
      EXPECT_EQ(events[0].worker, 3);
      EXPECT_EQ(events[0].state, State::kStraggler);
      EXPECT_LE(events[0].iteration, 60 + 2);
      EXPECT_EQ(events[0].cause, StragglerCause::kCompute);
      EXPECT_EQ(events[0].kind, StragglerKind::kDynamic);
      EXPECT_GE(events[0].slowdown, DetectorOptions{}.step_slowdown);
      EXPECT_EQ(events[1].state, State::kRecovered);
      EXPECT_GT(events[1].iteration, 140);
    }
  }
}

TEST_P(StepPath, TurnedOffTheSameStepWaitsForTheWindow) {
  const std::vector<Event> events = RunStepEpisode(WithRule(GetParam(), 0), 3.0, 1);
  ASSERT_FALSE(events.empty());
  EXPECT_GT(events[0].iteration, 60 + 2);
}

TEST_P(StepPath, ASingleSlowSampleFlagsNobody) {
  // One 5x sample every 20 iterations on worker 3 (a hiccup: a page fault storm, a
  // checkpoint): never two in a row.
  TraceSpec spec;
  for (int64_t it = 20; it < spec.iterations; it += 20) {
    spec.episodes.push_back(Episode{3, it, it + 1, 5.0, 5.0});
  }
  const std::vector<Event> events = RunDetector(WithRule(GetParam()), MakeTrace(spec, 3));
  EXPECT_TRUE(events.empty()) << Describe(events);
}

TEST_P(StepPath, ALoadThatSlowsEveryWorkerCancelsOut) {
  TraceSpec spec;
  for (int w = 0; w < spec.workers; ++w) spec.episodes.push_back(Episode{w, 60, 140, 2.5, 2.0});
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const std::vector<Event> events = RunDetector(WithRule(GetParam()), MakeTrace(spec, seed));
    EXPECT_TRUE(events.empty()) << "seed " << seed << "\n" << Describe(events);
  }
}

TEST_P(StepPath, RaisesNoEventsOnNoiseOnly) {
  for (double noise : {0.05, 0.10}) {
    for (uint64_t seed = 300; seed < 330; ++seed) {
      TraceSpec spec;
      spec.iterations = 300;
      spec.noise = noise;
      const std::vector<Event> events = RunDetector(WithRule(GetParam()), MakeTrace(spec, seed));
      EXPECT_TRUE(events.empty()) << "noise " << noise << " seed " << seed << "\n"
                                  << Describe(events);
    }
  }
}

TEST_P(StepPath, ALinkStepIsACommunicationStraggler) {
  TraceSpec spec;
  spec.episodes = {Episode{5, 60, 140, 1.0, 6.0}};  // 0.08 + 0.12: 2x the typical total
  const std::vector<Event> events = RunDetector(WithRule(GetParam()), MakeTrace(spec, 2));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].worker, 5);
  EXPECT_LE(events[0].iteration, 60 + 2);
  EXPECT_EQ(events[0].cause, StragglerCause::kCommunication);
}

INSTANTIATE_TEST_SUITE_P(Rules, StepPath,
                         ::testing::Values(Rule::kMad, Rule::kRelativeScore, Rule::kStar,
                                           Rule::kChangePoint),
                         [](const auto& info) { return std::string(RuleName(info.param)); });

TEST(StepPathKind, SlowFromItsFirstSamplesIsNoStepButStaticByItsWindow) {
  // No earlier samples show a change: the window flags it, static, once it is full and
  // the onset held for onset_evaluations rounds (iterations 9, 10, 11).
  const DetectorOptions o;
  TraceSpec spec;
  spec.episodes = {Episode{2, 0, 200, 3.0, 1.0}};
  const std::vector<Event> events = RunDetector(o, MakeTrace(spec, 4));
  ASSERT_EQ(events.size(), 1u) << Describe(events);
  EXPECT_EQ(events[0].worker, 2);
  EXPECT_EQ(events[0].iteration, o.window - 1 + o.onset_evaluations - 1);
  EXPECT_EQ(events[0].kind, StragglerKind::kStatic);
}

TEST(StepPathKind, NeedsThreeWorkersWithSamples) {
  // 10x compute: 0.82 s against 0.10 s, 1.78x the mean of the two, which would pass the
  // 1.6x step if two workers made a cohort.
  TraceSpec spec;
  spec.workers = 2;
  spec.episodes = {Episode{1, 0, 200, 10.0, 1.0}};
  DetectorOptions o;
  o.rule = Rule::kStar;
  // Two workers: no typical step level; rule star flags it from its full window.
  const std::vector<Event> events = RunDetector(o, MakeTrace(spec, 5));
  ASSERT_FALSE(events.empty());
  EXPECT_GE(events[0].iteration, o.window - 1);
}

TEST(StepPathKind, StepSamplesSetsHowManySlowSamplesItNeeds) {
  DetectorOptions o;
  o.step_samples = 4;
  const std::vector<Event> events = RunStepEpisode(o, 3.0, 6);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].iteration, 60 + 3);
}

TEST(StepPathKind, ANewStragglersLevelIsItsStepLevelUntilItsWindowShowsIt) {
  TraceSpec spec;
  spec.noise = 0;
  spec.iterations = 100;
  spec.episodes = {Episode{3, 60, 100, 3.0, 1.0}};  // 0.24 + 0.02 against 0.10
  const std::vector<Sample> trace = MakeTrace(spec, 1);
  Detector d;
  std::vector<Event> events;
  for (const Sample& s : trace) {
    d.Observe(s, &events);
    if (!events.empty()) break;
  }
  ASSERT_EQ(events.size(), 1u) << Describe(events);
  WorkerView v = d.View(3);
  EXPECT_TRUE(v.straggler);
  EXPECT_NEAR(v.median_seconds, 0.10, 1e-9);  // the window: 8 of 10 samples before the step
  EXPECT_NEAR(v.level_seconds, 0.26, 1e-9);
  EXPECT_NEAR(d.View(0).level_seconds, 0.10, 1e-9);
  for (const Sample& s : trace) {
    if (s.iteration > events[0].iteration) d.Observe(s, &events);
  }
  d.Flush(&events);
  v = d.View(3);
  EXPECT_NEAR(v.median_seconds, 0.26, 1e-9);  // the window caught up
  EXPECT_NEAR(v.level_seconds, v.median_seconds, 1e-12);
}

}  // namespace
}  // namespace star::detect
