// How soon the straggler detector flags an onset and reports a recovery, and how often
// it flags a worker that is not slowed, on synthetic per-iteration traces (core's
// detect/trace_for_test.h: 8 workers, 80 ms compute + 20 ms communication, 5% lognormal
// noise on each, every worker reporting every iteration).
//
// BM_DetectLatency/<rule>/<factor x 10>/<variant>: worker 3's compute is slowed by the factor in
// iterations [60, 140) of 200, over 40 seeds. Counters (in iterations): the median and
// largest onset latency (onset event's iteration - 60) and recovery latency (recovery
// event's iteration - 140), episodes missed (no onset or no recovery), and false alarms
// (onsets of other workers). BM_DetectNoiseOnly/<rule>/<variant>/<noise %>: 40
// noise-only traces; counter false_alarms. Rules: 0 mad, 1 relative, 2 star,
// 3 change_point. Variants of the default options: 0 the defaults (the step path and
// the full window: the control loop's), 1 the window path alone (step_slowdown 0),
// 2 the window path on the newest 4 samples alone (`star detect --step-slowdown 0
// --onset-window 4`).
#include <algorithm>
#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "../../core/src/detect/trace_for_test.h"
#include "star/core/detect/detector.h"

namespace {

using star::detect::DetectorOptions;
using star::detect::Event;
using star::detect::State;
namespace t = star::detect::testing;

constexpr int kSeeds = 40;
constexpr int64_t kStart = 60, kEnd = 140;

DetectorOptions OptionsOf(int64_t rule, int64_t variant) {
  DetectorOptions o;
  o.rule = static_cast<star::api::DetectionRule>(rule);
  if (variant >= 1) o.step_slowdown = 0;
  if (variant == 2) o.onset_window = 4;
  return star::detect::ResolveDefaults(o);
}

double Max(const std::vector<double>& v) {
  return v.empty() ? -1 : *std::max_element(v.begin(), v.end());
}

void BM_DetectLatency(benchmark::State& state) {
  const DetectorOptions o = OptionsOf(state.range(0), state.range(2));
  const double factor = static_cast<double>(state.range(1)) / 10;
  std::vector<double> onset, recovery;
  int missed = 0, false_alarms = 0;
  for (auto _ : state) {
    onset.clear();
    recovery.clear();
    missed = false_alarms = 0;
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      t::TraceSpec spec;
      spec.episodes = {t::Episode{3, kStart, kEnd, factor, 1.0}};
      std::optional<int64_t> on, off;
      for (const Event& e : t::RunDetector(o, t::MakeTrace(spec, seed))) {
        if (e.worker != 3) {
          false_alarms += e.state == State::kStraggler;
        } else if (e.state == State::kStraggler && !on) {
          on = e.iteration;
        } else if (e.state == State::kRecovered && on && !off) {
          off = e.iteration;
        }
      }
      if (!on || !off) ++missed;
      if (on) onset.push_back(static_cast<double>(*on - kStart));
      if (off) recovery.push_back(static_cast<double>(*off - kEnd));
    }
  }
  state.counters["onset_median"] = t::MedianOrMinusOne(onset);
  state.counters["onset_max"] = Max(onset);
  state.counters["recovery_median"] = t::MedianOrMinusOne(recovery);
  state.counters["recovery_max"] = Max(recovery);
  state.counters["missed"] = missed;
  state.counters["false_alarms"] = false_alarms;
}

void BM_DetectNoiseOnly(benchmark::State& state) {
  const DetectorOptions o = OptionsOf(state.range(0), state.range(1));
  t::TraceSpec spec;
  spec.noise = static_cast<double>(state.range(2)) / 100;
  int false_alarms = 0;
  for (auto _ : state) {
    false_alarms = 0;
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      for (const Event& e : t::RunDetector(o, t::MakeTrace(spec, seed))) {
        false_alarms += e.state == State::kStraggler;
      }
    }
  }
  state.counters["false_alarms"] = false_alarms;
}

}  // namespace

BENCHMARK(BM_DetectLatency)
    ->ArgsProduct({{0, 1, 2, 3}, {15, 20, 30}, {0, 1, 2}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DetectNoiseOnly)
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}, {5, 10, 15}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
