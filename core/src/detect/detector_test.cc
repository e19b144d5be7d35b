#include "star/core/detect/detector.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "detect/trace_for_test.h"

namespace star::detect {
namespace {

using api::StragglerCause;
using api::StragglerKind;
using testing::Describe;
using testing::Episode;
using testing::MakeTrace;
using testing::RunDetector;
using testing::TraceSpec;

constexpr Rule kAllRules[] = {Rule::kMad, Rule::kRelativeScore, Rule::kStar, Rule::kChangePoint};

DetectorOptions Options(Rule rule) {
  DetectorOptions o;
  o.rule = rule;
  return o;
}

// Iterations after a step change within which the detector must react: the windowed
// statistic needs up to a full window to move, then the persistence requirement (and,
// for the change-point rule, the minimum shift length) must be met.
int64_t LatencyBound(const DetectorOptions& o) {
  int64_t bound = o.window + o.onset_evaluations + 2;
  if (o.rule == Rule::kChangePoint) bound += o.change_point_min_iterations;
  return bound;
}


// ---- names, options, JSON --------------------------------------------------------------

TEST(RuleNames, RoundTripThroughWireNames) {
  EXPECT_EQ(RuleName(Rule::kMad), "mad");
  EXPECT_EQ(RuleName(Rule::kRelativeScore), "relative");
  EXPECT_EQ(RuleName(Rule::kStar), "star");
  EXPECT_EQ(RuleName(Rule::kChangePoint), "change_point");
  for (Rule r : kAllRules) EXPECT_EQ(ParseRule(RuleName(r)), r);
  EXPECT_EQ(ParseRule("MAD"), std::nullopt);
  EXPECT_EQ(ParseRule(""), std::nullopt);
  EXPECT_EQ(ParseRule("changepoint"), std::nullopt);
}

TEST(DetectorOptions, DefaultsAreValidForEveryRule) {
  for (Rule r : kAllRules) {
    EXPECT_TRUE(Validate(Options(r)).ok()) << RuleName(r) << ": " << Validate(Options(r));
    DetectorOptions o = Options(r);
    o.threshold = std::nan("");
    o.recovery_threshold = std::nan("");
    EXPECT_TRUE(Validate(o).ok()) << RuleName(r);
  }
}

TEST(DetectorOptions, ResolveDefaultsFillsRuleSpecificThresholds) {
  struct Case { Rule rule; double on, off; };
  for (const Case& c : {Case{Rule::kMad, 3.0, 2.0}, Case{Rule::kRelativeScore, 0.75, 0.85},
                        Case{Rule::kStar, 0.2, 0.1}, Case{Rule::kChangePoint, 0.2, 0.1}}) {
    DetectorOptions r = ResolveDefaults(Options(c.rule));
    EXPECT_DOUBLE_EQ(r.threshold, c.on) << RuleName(c.rule);
    EXPECT_DOUBLE_EQ(r.recovery_threshold, c.off) << RuleName(c.rule);
  }
  DetectorOptions o = Options(Rule::kStar);
  o.threshold = 0.3;
  EXPECT_DOUBLE_EQ(ResolveDefaults(o).threshold, 0.3);
}

TEST(DetectorOptions, ValidateRejectsBadFieldsAndNamesThem) {
  struct Case {
    const char* field;
    void (*mutate)(DetectorOptions*);
  };
  const Case cases[] = {
      {"window", [](DetectorOptions* o) { o->window = 2; }},
      {"window", [](DetectorOptions* o) { o->window = 100000; }},
      {"threshold", [](DetectorOptions* o) { o->threshold = -1; }},
      {"threshold", [](DetectorOptions* o) { o->threshold = INFINITY; }},
      {"threshold", [](DetectorOptions* o) { o->rule = Rule::kRelativeScore; o->threshold = 1.5; }},
      {"recovery_threshold", [](DetectorOptions* o) { o->recovery_threshold = 4; }},
      {"recovery_threshold",
       [](DetectorOptions* o) { o->rule = Rule::kRelativeScore; o->recovery_threshold = 0.5; }},
      {"recovery_threshold", [](DetectorOptions* o) { o->rule = Rule::kStar; o->recovery_threshold = 0.5; }},
      {"min_slowdown", [](DetectorOptions* o) { o->min_slowdown = 0.9; }},
      {"recovery_slowdown", [](DetectorOptions* o) { o->recovery_slowdown = 1.5; }},
      {"change_point_min_iterations", [](DetectorOptions* o) { o->change_point_min_iterations = -1; }},
      {"onset_evaluations", [](DetectorOptions* o) { o->onset_evaluations = 0; }},
      {"recovery_evaluations", [](DetectorOptions* o) { o->recovery_evaluations = 5000; }},
      {"static_after_iterations", [](DetectorOptions* o) { o->static_after_iterations = 0; }},
      {"onset_window", [](DetectorOptions* o) { o->onset_window = -1; }},
      {"step_slowdown", [](DetectorOptions* o) { o->step_slowdown = 1; }},
      {"step_slowdown", [](DetectorOptions* o) { o->step_slowdown = -2; }},
      {"step_slowdown", [](DetectorOptions* o) { o->step_slowdown = NAN; }},
      {"step_samples", [](DetectorOptions* o) { o->step_samples = 0; }},
      {"step_samples", [](DetectorOptions* o) { o->step_samples = 11; }},
      {"cause_switch_ratio", [](DetectorOptions* o) { o->cause_switch_ratio = 0.5; }},
      {"rule", [](DetectorOptions* o) { o->rule = static_cast<Rule>(42); }},
  };
  for (const Case& c : cases) {
    DetectorOptions o;
    c.mutate(&o);
    Status s = Validate(o);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind(std::string(c.field) + ": ", 0), 0u) << s.message();
  }
}

TEST(DetectorOptions, ValidateMessageGivesReasonAndValue) {
  DetectorOptions o;
  o.window = 1;
  EXPECT_EQ(Validate(o).message(), "window: must be in [3, 1024], got 1");
  o = Options(Rule::kRelativeScore);
  o.threshold = 1.5;
  EXPECT_EQ(Validate(o).message(), "threshold: must be in (0, 1) for rule relative, got 1.5");
}

TEST(EventJson, StragglerMatchesCliContract) {
  Event e{120, 3, State::kStraggler, StragglerCause::kCommunication, StragglerKind::kStatic,
          1.734567};
  nlohmann::json j = ToJson(e);
  EXPECT_EQ(j, nlohmann::json::parse(R"({"iteration":120,"worker":3,"state":"straggler",
      "cause":"communication","kind":"static","slowdown":1.7346})"));
  EXPECT_EQ(ToJsonLine(e),
            R"({"iteration":120,"worker":3,"state":"straggler","cause":"communication",)"
            R"("kind":"static","slowdown":1.7346})");
}

TEST(EventJson, RecoveredCarriesOnlyIterationWorkerState) {
  Event e{7, 0, State::kRecovered, StragglerCause::kCompute, StragglerKind::kDynamic, 1.0};
  EXPECT_EQ(ToJson(e), nlohmann::json::parse(R"({"iteration":7,"worker":0,"state":"recovered"})"));
  EXPECT_EQ(ToJsonLine(e), R"({"iteration":7,"worker":0,"state":"recovered"})");
}

// ---- detection on synthetic traces, for every rule -------------------------------------

class EveryRule : public ::testing::TestWithParam<Rule> {};

INSTANTIATE_TEST_SUITE_P(Rules, EveryRule, ::testing::ValuesIn(kAllRules),
                         [](const auto& info) { return std::string(RuleName(info.param)); });

// Checks that `events` are exactly one onset and one recovery of episode `e`, with the
// expected cause and a dynamic kind, each within the latency bound.
void ExpectOneEpisode(const DetectorOptions& o, const std::vector<Event>& events,
                      const Episode& e, StragglerCause cause) {
  ASSERT_EQ(events.size(), 2u) << Describe(events);
  const Event& on = events[0];
  const Event& off = events[1];
  EXPECT_EQ(on.state, State::kStraggler);
  EXPECT_EQ(on.worker, e.worker);
  EXPECT_EQ(on.cause, cause) << Describe(events);
  EXPECT_EQ(on.kind, StragglerKind::kDynamic);
  EXPECT_GE(on.iteration, e.start);
  EXPECT_LE(on.iteration, e.start + LatencyBound(o)) << Describe(events);
  EXPECT_GT(on.slowdown, 1.2);
  EXPECT_EQ(off.state, State::kRecovered);
  EXPECT_EQ(off.worker, e.worker);
  EXPECT_GE(off.iteration, e.end);
  EXPECT_LE(off.iteration, e.end + LatencyBound(o)) << Describe(events);
}

TEST_P(EveryRule, DetectsComputeEpisodeWithCauseAndRecovery) {
  const DetectorOptions o = Options(GetParam());
  for (double factor : {1.5, 2.0, 3.0}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      SCOPED_TRACE("factor " + std::to_string(factor) + " seed " + std::to_string(seed));
      TraceSpec spec;
      spec.episodes = {Episode{3, 60, 140, factor, 1.0}};
      ExpectOneEpisode(o, RunDetector(o, MakeTrace(spec, seed)), spec.episodes[0],
                       StragglerCause::kCompute);
    }
  }
}

TEST_P(EveryRule, DetectsCommunicationEpisodeWithCauseAndRecovery) {
  const DetectorOptions o = Options(GetParam());
  for (double factor : {3.0, 5.0}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      SCOPED_TRACE("factor " + std::to_string(factor) + " seed " + std::to_string(seed));
      TraceSpec spec;
      spec.episodes = {Episode{5, 80, 150, 1.0, factor}};
      ExpectOneEpisode(o, RunDetector(o, MakeTrace(spec, seed)), spec.episodes[0],
                       StragglerCause::kCommunication);
    }
  }
}

TEST_P(EveryRule, NoiseOnlyTracesRaiseNoEvents) {
  const DetectorOptions o = Options(GetParam());
  for (uint64_t seed = 100; seed < 140; ++seed) {
    TraceSpec spec;
    spec.iterations = 300;
    spec.noise = 0.07;
    const std::vector<Event> events = RunDetector(o, MakeTrace(spec, seed));
    EXPECT_TRUE(events.empty()) << "seed " << seed << "\n" << Describe(events);
  }
}

TEST_P(EveryRule, WorkerSlowFromTheStartIsStatic) {
  const DetectorOptions o = Options(GetParam());
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    TraceSpec spec;
    spec.episodes = {Episode{2, 0, spec.iterations, 2.0, 1.0}};
    const std::vector<Event> events = RunDetector(o, MakeTrace(spec, seed));
    ASSERT_EQ(events.size(), 1u) << "seed " << seed << "\n" << Describe(events);
    EXPECT_EQ(events[0].worker, 2);
    EXPECT_EQ(events[0].state, State::kStraggler);
    EXPECT_EQ(events[0].kind, StragglerKind::kStatic);
    EXPECT_EQ(events[0].cause, StragglerCause::kCompute);
    EXPECT_LE(events[0].iteration, LatencyBound(o));
  }
}

TEST_P(EveryRule, EpisodesNearTheThresholdDoNotFlap) {
  // Slowdowns straddling every rule's onset threshold keep the windowed statistic
  // hovering around it; hysteresis must allow at most one onset and one recovery, and
  // no recovery before the episode ends.
  const DetectorOptions o = Options(GetParam());
  for (int step = 0; step <= 14; ++step) {
    const double factor = 1.1 + 0.025 * step;
    for (uint64_t seed = 20; seed < 23; ++seed) {
      SCOPED_TRACE("factor " + std::to_string(factor) + " seed " + std::to_string(seed));
      TraceSpec spec;
      spec.iterations = 250;
      spec.episodes = {Episode{1, 50, 200, factor, factor}};
      const std::vector<Event> events = RunDetector(o, MakeTrace(spec, seed));
      ASSERT_LE(events.size(), 2u) << Describe(events);
      if (events.empty()) continue;
      EXPECT_EQ(events[0].worker, 1);
      EXPECT_EQ(events[0].state, State::kStraggler);
      if (events.size() == 2) {
        EXPECT_EQ(events[1].state, State::kRecovered);
        EXPECT_GE(events[1].iteration, 200) << Describe(events);
      }
    }
  }
}

TEST_P(EveryRule, IdenticalTimesFlagNobody) {
  const DetectorOptions o = Options(GetParam());
  TraceSpec spec;
  spec.noise = 0;
  EXPECT_TRUE(RunDetector(o, MakeTrace(spec, 1)).empty());
}

TEST_P(EveryRule, DetectsEpisodeWhenWorkersReportEveryFewIterations) {
  const DetectorOptions o = Options(GetParam());
  TraceSpec spec;
  spec.iterations = 600;
  spec.report_every = 3;
  spec.episodes = {Episode{4, 200, 350, 2.0, 1.0}};
  const std::vector<Event> events = RunDetector(o, MakeTrace(spec, 9));
  ASSERT_EQ(events.size(), 2u) << Describe(events);
  EXPECT_EQ(events[0].worker, 4);
  EXPECT_EQ(events[0].state, State::kStraggler);
  EXPECT_EQ(events[1].state, State::kRecovered);
  // Each evaluation now spans 3 iterations.
  EXPECT_GE(events[0].iteration, 200);
  EXPECT_LE(events[0].iteration, 200 + 3 * LatencyBound(o));
  EXPECT_GE(events[1].iteration, 350);
  EXPECT_LE(events[1].iteration, 350 + 3 * LatencyBound(o));
}

// ---- rule-specific and classification behaviour -----------------------------------------

// The options `star detect --onset-window 4` uses.
DetectorOptions ShortLevel() {
  DetectorOptions o;
  o.onset_window = 4;
  return o;
}

TEST(MadRule, AShortLevelFlagsAStepWithinFourIterationsAndReportsItsRecovery) {
  // The worker's level is the median of its newest 4 samples: a step shows once 2 or 3
  // of them are slow, and the onset needs 3 rounds of it. With the full window of 10
  // (the default) it takes 6-7 iterations (bench/detect_latency_bench).
  for (double factor : {1.5, 2.0, 3.0}) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      SCOPED_TRACE("factor " + std::to_string(factor) + " seed " + std::to_string(seed));
      const std::vector<Event> events = testing::RunStepEpisode(ShortLevel(), factor, seed);
      ASSERT_EQ(events.size(), 2u) << Describe(events);
      EXPECT_LE(events[0].iteration, 60 + 4);
      EXPECT_EQ(events[1].state, State::kRecovered);
      EXPECT_LE(events[1].iteration, 140 + 5);
    }
  }
  // The default is the full window's median: slower (without the step path, which
  // flags a 2x step sooner still: detector_step_test.cc).
  DetectorOptions window_only;
  window_only.step_slowdown = 0;
  const std::vector<Event> events = testing::RunStepEpisode(window_only, 2.0, 1);
  ASSERT_FALSE(events.empty());
  EXPECT_GT(events[0].iteration, 60 + 4);
}

TEST(MadRule, AShortLevelRaisesNoEventsOnNoiseOnly) {
  for (double noise : {0.05, 0.10}) {
    for (uint64_t seed = 200; seed < 230; ++seed) {
      TraceSpec spec;
      spec.iterations = 300;
      spec.noise = noise;
      const std::vector<Event> events = RunDetector(ShortLevel(), MakeTrace(spec, seed));
      EXPECT_TRUE(events.empty()) << "noise " << noise << " seed " << seed << "\n" << Describe(events);
    }
  }
}

TEST(MadRule, NoiseOnlyAtTenPercentRaisesNoEvents) {
  const DetectorOptions o;
  for (uint64_t seed = 200; seed < 230; ++seed) {
    TraceSpec spec;
    spec.iterations = 300;
    spec.noise = 0.10;
    const std::vector<Event> events = RunDetector(o, MakeTrace(spec, seed));
    EXPECT_TRUE(events.empty()) << "seed " << seed << "\n" << Describe(events);
  }
}

TEST(MadRule, MadOfZeroFlagsOnlyASeparateClass) {
  // More than half of the workers are exactly equal: MAD = 0, no spread estimate. A
  // worker 1.24x slower (under the class gap) is not flagged by the window rule; one
  // 1.8x slower is a class of its own, and the gap is the evidence.
  DetectorOptions window_only;
  window_only.step_slowdown = 0;
  TraceSpec spec;
  spec.noise = 0;
  spec.episodes = {Episode{1, 0, spec.iterations, 1.3, 1.0}};
  EXPECT_TRUE(RunDetector(window_only, MakeTrace(spec, 1)).empty());
  spec.episodes = {Episode{1, 0, spec.iterations, 2.0, 1.0}};
  const std::vector<Event> window = RunDetector(window_only, MakeTrace(spec, 1));
  ASSERT_EQ(window.size(), 1u) << Describe(window);
  EXPECT_EQ(window[0].worker, 1);
  EXPECT_EQ(window[0].kind, StragglerKind::kStatic);
  // The same with the step path on: a worker slow from its first samples shows no step.
  EXPECT_EQ(RunDetector(DetectorOptions{}, MakeTrace(spec, 1)), window);
  // The relative rules do flag it.
  const std::vector<Event> star = RunDetector(Options(Rule::kStar), MakeTrace(spec, 1));
  ASSERT_EQ(star.size(), 1u) << Describe(star);
  EXPECT_EQ(star[0].worker, 1);
}

TEST(MadRule, MinSlowdownGuardsAgainstTinyMad) {
  // Nearly identical workers (0.1% noise): a 10% slower worker is many MADs out, but
  // below the default 20% minimum slowdown, so it is not flagged; lowering the guard
  // flags it.
  TraceSpec spec;
  spec.noise = 0.001;
  spec.episodes = {Episode{6, 50, 150, 1.1, 1.1}};
  EXPECT_TRUE(RunDetector(DetectorOptions{}, MakeTrace(spec, 4)).empty());
  DetectorOptions loose;
  loose.min_slowdown = 1.05;
  loose.recovery_slowdown = 1.02;
  const std::vector<Event> events = RunDetector(loose, MakeTrace(spec, 4));
  ASSERT_EQ(events.size(), 2u) << Describe(events);
  EXPECT_EQ(events[0].worker, 6);
}

TEST(Detector, SlowdownIsWindowedTimeOverTypicalWorker) {
  TraceSpec spec;
  spec.noise = 0.02;
  spec.episodes = {Episode{0, 0, spec.iterations, 2.0, 1.0}};  // 160 + 20 ms vs 100 ms
  const std::vector<Event> events = RunDetector(DetectorOptions{}, MakeTrace(spec, 3));
  ASSERT_EQ(events.size(), 1u) << Describe(events);
  EXPECT_NEAR(events[0].slowdown, 1.8, 0.05);
}

TEST(Detector, LongEpisodeTurnsStaticWithANewStragglerEvent) {
  DetectorOptions o;
  o.static_after_iterations = 100;
  TraceSpec spec;
  spec.iterations = 400;
  spec.episodes = {Episode{3, 50, 300, 2.0, 1.0}};
  const std::vector<Event> events = RunDetector(o, MakeTrace(spec, 5));
  ASSERT_EQ(events.size(), 3u) << Describe(events);
  EXPECT_EQ(events[0].kind, StragglerKind::kDynamic);
  EXPECT_EQ(events[1].state, State::kStraggler);
  EXPECT_EQ(events[1].worker, 3);
  EXPECT_EQ(events[1].kind, StragglerKind::kStatic);
  EXPECT_EQ(events[1].cause, StragglerCause::kCompute);
  EXPECT_EQ(events[1].iteration - events[0].iteration, 100);
  EXPECT_EQ(events[2].state, State::kRecovered);
}

TEST(Detector, CauseChangeMidEpisodeEmitsNewStragglerEvent) {
  TraceSpec spec;
  spec.iterations = 300;
  spec.episodes = {Episode{2, 50, 120, 2.0, 1.0}, Episode{2, 120, 200, 1.0, 6.0}};
  const std::vector<Event> events = RunDetector(DetectorOptions{}, MakeTrace(spec, 6));
  ASSERT_EQ(events.size(), 3u) << Describe(events);
  EXPECT_EQ(events[0].cause, StragglerCause::kCompute);
  EXPECT_EQ(events[1].state, State::kStraggler);
  EXPECT_EQ(events[1].cause, StragglerCause::kCommunication);
  EXPECT_GE(events[1].iteration, 120);
  EXPECT_LE(events[1].iteration, 120 + LatencyBound(DetectorOptions{}));
  EXPECT_EQ(events[2].state, State::kRecovered);
  EXPECT_GE(events[2].iteration, 200);
}

TEST(RelativeScoreRule, IndividualScoreFlagsAWorkerSlowerThanItsOwnBest) {
  // Every worker slows 1.6x at once: nobody is slower than the fastest, but each is
  // slower than its own best.
  TraceSpec spec;
  spec.workers = 4;
  for (int w = 0; w < spec.workers; ++w) spec.episodes.push_back(Episode{w, 80, 160, 1.6, 1.6});
  DetectorOptions o = Options(Rule::kRelativeScore);
  EXPECT_TRUE(RunDetector(o, MakeTrace(spec, 2)).empty());
  o.individual_score = true;
  const std::vector<Event> events = RunDetector(o, MakeTrace(spec, 2));
  int onsets = 0, recoveries = 0;
  for (const Event& e : events) (e.state == State::kStraggler ? onsets : recoveries)++;
  EXPECT_EQ(onsets, 4) << Describe(events);
  EXPECT_EQ(recoveries, 4) << Describe(events);
}

TEST(Detector, WorkerJoiningLateAndSlowIsStatic) {
  TraceSpec spec;
  spec.episodes = {Episode{7, 0, spec.iterations, 2.0, 1.0}};
  std::vector<Sample> trace = MakeTrace(spec, 8);
  std::erase_if(trace, [](const Sample& s) { return s.worker == 7 && s.iteration < 60; });
  const std::vector<Event> events = RunDetector(DetectorOptions{}, trace);
  ASSERT_EQ(events.size(), 1u) << Describe(events);
  EXPECT_EQ(events[0].worker, 7);
  EXPECT_EQ(events[0].kind, StragglerKind::kStatic);
  EXPECT_GE(events[0].iteration, 60);
}

TEST(Detector, LargeCohortFindsTheOneStraggler) {
  TraceSpec spec;
  spec.workers = 512;
  spec.iterations = 80;
  spec.episodes = {Episode{300, 30, 80, 1.5, 1.0}};
  const std::vector<Event> events = RunDetector(DetectorOptions{}, MakeTrace(spec, 10));
  ASSERT_EQ(events.size(), 1u) << Describe(events);
  EXPECT_EQ(events[0].worker, 300);
}

TEST(Detector, ViewAndIsStragglerFollowTheEvents) {
  TraceSpec spec;
  spec.episodes = {Episode{1, 40, 120, 2.0, 1.0}};
  const std::vector<Sample> trace = MakeTrace(spec, 11);
  Detector d;
  std::vector<Event> events;
  EXPECT_FALSE(d.View(1).known);
  bool was_straggler = false;
  for (const Sample& s : trace) {
    d.Observe(s, &events);
    for (const Event& e : events) {
      ASSERT_EQ(e.worker, 1);
      EXPECT_EQ(e.state == State::kStraggler, d.IsStraggler(1));
      const WorkerView v = d.View(1);
      EXPECT_EQ(v.straggler, d.IsStraggler(1));
      if (v.straggler) {
        EXPECT_EQ(v.since_iteration, e.iteration);
        EXPECT_EQ(v.cause, e.cause);
        EXPECT_DOUBLE_EQ(v.slowdown, e.slowdown);
        EXPECT_EQ(d.Stragglers(), std::vector<int>{1});
        was_straggler = true;
      } else {
        EXPECT_EQ(v.since_iteration, -1);
        EXPECT_TRUE(d.Stragglers().empty());
      }
    }
    events.clear();
  }
  EXPECT_TRUE(was_straggler);
  EXPECT_EQ(d.num_workers(), 8);
  EXPECT_TRUE(d.View(0).ready);
  EXPECT_EQ(d.View(0).last_iteration, spec.iterations - 1);
  EXPECT_NEAR(d.View(0).median_seconds, 0.1, 0.01);
  EXPECT_FALSE(d.View(99).known);
  EXPECT_FALSE(d.IsStraggler(-1));
}

TEST(Detector, WorkerReportOverloadMatchesSamples) {
  TraceSpec spec;
  spec.episodes = {Episode{6, 30, 90, 2.5, 1.0}};
  const std::vector<Sample> trace = MakeTrace(spec, 12);
  Detector a, b;
  std::vector<Event> ea, eb;
  for (const Sample& s : trace) {
    a.Observe(s, &ea);
    api::WorkerReport r;
    r.worker = s.worker;
    r.iteration = s.iteration;
    r.compute_seconds = s.compute_seconds;
    r.communication_seconds = s.communication_seconds;
    r.wait_seconds = 0.5;  // waiting is not part of t_i
    b.Observe(r, &eb);
  }
  EXPECT_FALSE(ea.empty());
  EXPECT_EQ(ea, eb);
}

TEST(Detector, IgnoresInvalidSamples) {
  TraceSpec spec;
  spec.episodes = {Episode{2, 40, 100, 2.0, 1.0}};
  const std::vector<Sample> clean = MakeTrace(spec, 13);
  std::vector<Sample> dirty;
  for (const Sample& s : clean) {
    dirty.push_back(s);
    if (s.worker == 2) {
      dirty.push_back(Sample{s.iteration, -1, 5.0, 5.0});
      dirty.push_back(Sample{s.iteration, 0, std::nan(""), 0.0});
      dirty.push_back(Sample{s.iteration, 0, -1.0, 0.0});
      if (s.iteration > 0) dirty.push_back(Sample{s.iteration - 1, 2, 9.0, 9.0});
    }
  }
  const std::vector<Event> expected = RunDetector(DetectorOptions{}, clean);
  EXPECT_EQ(expected.size(), 2u);
  EXPECT_EQ(RunDetector(DetectorOptions{}, dirty), expected);
}

// Window 3, one onset evaluation, no step path: the first round in which worker 0 (slow
// from the start) has a full window flags it.
DetectorOptions FirstFullWindowFlags() {
  DetectorOptions o;
  o.window = 3;
  o.onset_evaluations = 1;
  o.step_slowdown = 0;  // the step path would flag it in the round of iteration 1
  return o;
}

Sample SlowWorkerZero(int64_t it, int w) { return Sample{it, w, w == 0 ? 0.3 : 0.1 + 0.001 * w, 0.02}; }

TEST(Detector, ARoundClosesAsSoonAsEveryWorkerHasReportedItsIteration) {
  Detector d(FirstFullWindowFlags());
  std::vector<Event> events;
  for (int64_t it = 0; it < 3; ++it) {
    for (int w = 0; w < 5; ++w) {
      d.Observe(SlowWorkerZero(it, w), &events);
      if (it < 2 || w < 4) {
        EXPECT_TRUE(events.empty()) << it << " " << w;
      }
    }
  }
  ASSERT_EQ(events.size(), 1u) << Describe(events);
  EXPECT_EQ(events[0].worker, 0);
  EXPECT_EQ(events[0].iteration, 2);
  d.Flush(&events);  // nothing pending
  EXPECT_EQ(events.size(), 1u);
}

TEST(Detector, FlushEvaluatesTheLastRound) {
  // The same, but worker 4 does not report iteration 2: that round stays open until a
  // later iteration arrives, or Flush.
  Detector d(FirstFullWindowFlags());
  std::vector<Event> events;
  for (int64_t it = 0; it < 3; ++it) {
    for (int w = 0; w < (it < 2 ? 5 : 4); ++w) d.Observe(SlowWorkerZero(it, w), &events);
  }
  EXPECT_TRUE(events.empty());
  d.Flush(&events);
  ASSERT_EQ(events.size(), 1u) << Describe(events);
  EXPECT_EQ(events[0].worker, 0);
  EXPECT_EQ(events[0].iteration, 2);
  EXPECT_EQ(events[0].kind, StragglerKind::kStatic);
  d.Flush(&events);  // nothing new: no second evaluation
  EXPECT_EQ(events.size(), 1u);
}

// Outside evidence (a strong slow link): flagged at once; its recovery is the window's.
TEST(DetectorFlag, FlagsAKnownWorkerOnceAndItsTimingsJudgeItsRecovery) {
  Detector d;
  std::vector<Event> events;
  auto feed = [&](int64_t from, int64_t to) {
    for (int64_t i = from; i <= to; ++i) {
      for (int w = 0; w < 4; ++w) d.Observe(Sample{i, w, 0.1 * (1 + 0.01 * w), 0.02}, &events);
    }
  };
  feed(1, 30);
  ASSERT_TRUE(events.empty()) << Describe(events);
  EXPECT_FALSE(d.Flag(9, StragglerCause::kCommunication, 3, &events)) << "never seen";
  EXPECT_FALSE(d.Flag(2, StragglerCause::kCommunication, NAN, &events));
  EXPECT_FALSE(d.Flag(2, StragglerCause::kCommunication, 0, &events));
  ASSERT_TRUE(events.empty());
  ASSERT_TRUE(d.Flag(2, StragglerCause::kCommunication, 3, &events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].worker, 2);
  EXPECT_EQ(events[0].state, State::kStraggler);
  EXPECT_EQ(events[0].cause, StragglerCause::kCommunication);
  EXPECT_EQ(events[0].kind, StragglerKind::kDynamic);
  EXPECT_EQ(events[0].slowdown, 3);
  EXPECT_EQ(events[0].iteration, 30);
  EXPECT_TRUE(d.IsStraggler(2));
  EXPECT_FALSE(d.Flag(2, StragglerCause::kCompute, 2, &events)) << "already straggling";
  events.clear();
  feed(31, 60);  // its timings are the cohort's: recovered once half a window followed
  ASSERT_EQ(events.size(), 1u) << Describe(events);
  EXPECT_EQ(events[0].state, State::kRecovered);
  EXPECT_GE(events[0].iteration, 30 + DetectorOptions{}.window / 2);
}

}  // namespace
}  // namespace star::detect
