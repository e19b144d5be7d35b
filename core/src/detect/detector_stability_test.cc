// The detector's state stays steady on the trace families of real clusters
// (trace_for_test.h): persistent and bimodal slowness is one episode, a late step on a
// slow worker is flagged within two samples, a clean heterogeneous cohort flags nobody.
// bench/detect-stability measures the same families over more seeds.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "detect/trace_for_test.h"
#include "star/core/detect/detector.h"

namespace star::detect {
namespace {

using api::StragglerKind;
using testing::Bimodal;
using testing::Describe;
using testing::EventsPerWorker;
using testing::Heterogeneous;
using testing::LateStep;
using testing::MakeTrace;
using testing::Persistent;
using testing::RunDetector;
using testing::TraceSpec;

constexpr uint64_t kSeeds = 5;

std::vector<Event> RunDefaults(const TraceSpec& spec, uint64_t seed) {
  return RunDetector(DetectorOptions{}, MakeTrace(spec, seed));
}

std::vector<Event> EventsOf(const std::vector<Event>& events, int worker) {
  std::vector<Event> out;
  for (const Event& e : events) {
    if (e.worker == worker) out.push_back(e);
  }
  return out;
}

std::string Name(const char* family, double factor, uint64_t seed) {
  return std::string(family) + " " + std::to_string(factor) + "x seed " + std::to_string(seed);
}

TEST(Stability, ASlowClassIsStaticStragglersThatNeitherFlapNorRecover) {
  for (int slow : {2, 5, 8}) {
    for (double factor : {2.0, 3.0, 4.0}) {
      for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
        SCOPED_TRACE(Name(("bimodal " + std::to_string(slow) + ":10").c_str(), factor, seed));
        const std::vector<Event> events = RunDefaults(Bimodal(slow, factor, seed), seed);
        const std::vector<int> per = EventsPerWorker(events, 10);
        for (int w = 0; w < 10; ++w) EXPECT_EQ(per[static_cast<size_t>(w)], w < slow ? 1 : 0) << Describe(events);
        for (const Event& e : events) {
          EXPECT_EQ(e.state, State::kStraggler);
          EXPECT_EQ(e.kind, StragglerKind::kStatic);
          EXPECT_NEAR(e.slowdown, factor, 0.25 * factor);
        }
      }
    }
  }
}

TEST(Stability, ANarrowSlowClassChangesStateAtMostTwice) {
  // 1.5x sits near the static floor (1.45): flagged or not, it must not flap.
  for (int slow : {2, 5, 8}) {
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      SCOPED_TRACE(Name("bimodal 1.5x", slow, seed));
      const std::vector<Event> events = RunDefaults(Bimodal(slow, 1.5, seed), seed);
      const std::vector<int> per = EventsPerWorker(events, 10);
      for (int w = 0; w < 10; ++w) {
        EXPECT_LE(per[static_cast<size_t>(w)], w < slow ? 2 : 0) << Describe(events);
      }
      for (const Event& e : events) EXPECT_EQ(e.state, State::kStraggler) << Describe(events);
    }
  }
}

TEST(Stability, APersistentSlowWorkerIsOneEpisode) {
  for (double factor : {1.5, 2.0, 3.0, 4.0}) {
    for (int64_t start : {0, 100}) {
      for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
        SCOPED_TRACE(Name(start == 0 ? "persistent from 0" : "persistent from 100", factor, seed));
        const std::vector<Event> events = RunDefaults(Persistent(factor, start, true, seed), seed);
        const std::vector<int> per = EventsPerWorker(events, 10);
        for (int w = 0; w < 10; ++w) {
          const bool slow = w == 3 || w == 6;
          if (slow && factor >= 2) {
            EXPECT_GE(per[static_cast<size_t>(w)], 1) << Describe(events);
          }
          EXPECT_LE(per[static_cast<size_t>(w)], slow ? 2 : 0) << Describe(events);
        }
        for (const Event& e : events) EXPECT_EQ(e.state, State::kStraggler) << Describe(events);
      }
    }
  }
}

TEST(Stability, ALateStepOnASlowWorkerIsFlaggedWithinTwoSamples) {
  constexpr int64_t kAt = 200;
  for (double step : {2.0, 4.0}) {
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      SCOPED_TRACE(Name("late step", step, seed));
      const std::vector<Event> events = RunDefaults(LateStep(3.0, step, kAt, seed), seed);
      const std::vector<Event> mine = EventsOf(events, 2);
      ASSERT_EQ(mine.size(), 2u) << Describe(events);
      EXPECT_EQ(mine[0].kind, StragglerKind::kStatic);
      EXPECT_LT(mine[0].iteration, kAt);
      EXPECT_EQ(mine[1].state, State::kStraggler);
      EXPECT_GE(mine[1].iteration, kAt);
      EXPECT_LE(mine[1].iteration, kAt + 1) << "the step's second sample";
      EXPECT_GT(mine[1].slowdown, 1.5 * mine[0].slowdown);
      EXPECT_EQ(mine[1].kind, StragglerKind::kStatic);
    }
  }
}

TEST(Stability, ASmallerLateStepIsAnUpdateOnceTheWindowShowsIt) {
  // 1.5x more is under the step path's 1.6x: the window flags it, min_slowdown over the
  // level the worker had settled at, in about half a window plus onset_evaluations.
  constexpr int64_t kAt = 200;
  const DetectorOptions o;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE(Name("late step", 1.5, seed));
    const std::vector<Event> events = RunDefaults(LateStep(3.0, 1.5, kAt, seed), seed);
    const std::vector<Event> mine = EventsOf(events, 2);
    ASSERT_EQ(mine.size(), 2u) << Describe(events);
    EXPECT_EQ(mine[1].state, State::kStraggler);
    EXPECT_GE(mine[1].iteration, kAt);
    EXPECT_LE(mine[1].iteration, kAt + o.window / 2 + o.onset_evaluations + 2);
    EXPECT_GT(mine[1].slowdown, 1.2 * mine[0].slowdown);
  }
}

TEST(Stability, ACleanHeterogeneousCohortFlagsNobody) {
  for (double spread : {1.2, 1.35}) {
    for (int slow_class : {0, 2, 5, 8}) {  // 0: spread evenly
      for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
        SCOPED_TRACE(Name(("slow class of " + std::to_string(slow_class)).c_str(), spread, seed));
        const std::vector<Event> events = RunDefaults(Heterogeneous(spread, slow_class, seed), seed);
        EXPECT_TRUE(events.empty()) << Describe(events);
      }
    }
  }
}

TEST(Stability, AnEpisodeOfAHeterogeneousWorkerIsJudgedAgainstItsOwnLevel) {
  // Worker 9 runs 1.3x slower than the fastest from the start (ordinary heterogeneity),
  // then 1.8x its own level for iterations [100, 200): flagged dynamic, and recovered
  // once back at its own 1.3x.
  TraceSpec spec = Heterogeneous(1.3, 0, 3);
  spec.episodes.push_back(testing::Episode{9, 100, 200, 1.8, 1.8});
  const std::vector<Event> events = RunDefaults(spec, 3);
  ASSERT_EQ(events.size(), 2u) << Describe(events);
  EXPECT_EQ(events[0].worker, 9);
  EXPECT_EQ(events[0].kind, StragglerKind::kDynamic);
  EXPECT_GE(events[0].iteration, 100);
  EXPECT_LE(events[0].iteration, 110);
  EXPECT_EQ(events[1].state, State::kRecovered);
  EXPECT_GE(events[1].iteration, 200);
}

TEST(Stability, TheClassSplitCanBeTurnedOff) {
  // Without it the typical worker of a 5:5 cohort sits between the classes.
  DetectorOptions off;
  off.class_gap = 0;
  const std::vector<Event> events = RunDetector(off, MakeTrace(Bimodal(5, 3.0, 1), 1));
  const std::vector<Event> split = RunDefaults(Bimodal(5, 3.0, 1), 1);
  EXPECT_EQ(split.size(), 5u) << Describe(split);
  EXPECT_NE(events, split) << Describe(events);
}

}  // namespace
}  // namespace star::detect
