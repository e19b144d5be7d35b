// How steady the straggler detector's state is on the trace families of real clusters
// (core's detect/trace_for_test.h: 10 workers, 300 iterations, each worker with its own
// jitter, a coefficient of variation from 2% to 8%, and 1% single-sample spikes of 1.3x),
// with the default options, over kSeeds seeds per cell. Counters:
//
// BM_Bimodal/<slow workers>/<factor x 10>: workers [0, slow) slower for the whole run.
//   max_changes: most events of one slow worker in one trace (goal <= 2); flagged: slow
//   workers flagged, of slow x seeds; recoveries: recovery events; fast_flags: events of
//   the other workers.
// BM_Persistent/<factor x 10>/<start>: workers 3 and 6 slower from `start` to the end.
//   Counters as above.
// BM_LateStep/<step x 10>: worker 2 3x slower from the start, `step` times slower again
//   from iteration 200. latency_max / latency_median: samples from the step to the
//   update event (1 = its first slow sample; goal <= 2 for the step path's steps of
//   1.6x and more, 1.5x is left to the window); missed: no event for the step;
//   max_changes: most events of worker 2.
// BM_Heterogeneous/<spread x 100>/<slow class>: no straggler, workers up to `spread`
//   apart: evenly (0), or that many workers `spread` times slower than the others.
//   flags: every event (goal 0).
// BM_Production/<slow workers>: a production-like trace: that many workers 3-4x slower
//   (each its own factor) for the whole run, and one of them 4x slower again from
//   iteration 220. events: all of them; max_changes; late_step_latency_max.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "../../core/src/detect/trace_for_test.h"
#include "star/core/detect/detector.h"

namespace {

using star::detect::DetectorOptions;
using star::detect::Event;
using star::detect::State;
namespace t = star::detect::testing;

constexpr uint64_t kSeeds = 20;
constexpr int kWorkers = 10;

std::vector<Event> Run(const t::TraceSpec& spec, uint64_t seed) {
  return t::RunDetector(DetectorOptions{}, t::MakeTrace(spec, seed));
}

// Counts over the traces of one cell: `slow(w)` says which workers are slowed.
struct Tally {
  int max_changes = 0, flagged = 0, recoveries = 0, other_flags = 0;

  template <typename Slow>
  void Add(const std::vector<Event>& events, Slow slow) {
    const std::vector<int> per = t::EventsPerWorker(events, kWorkers);
    for (int w = 0; w < kWorkers; ++w) {
      const int n = per[static_cast<size_t>(w)];
      if (slow(w)) {
        max_changes = std::max(max_changes, n);
        flagged += n > 0;
      } else {
        other_flags += n;
      }
    }
    for (const Event& e : events) recoveries += e.state == State::kRecovered;
  }

  void Report(benchmark::State& state, const char* other) const {
    state.counters["max_changes"] = max_changes;
    state.counters["flagged"] = flagged;
    state.counters["recoveries"] = recoveries;
    state.counters[other] = other_flags;
  }
};

void BM_Bimodal(benchmark::State& state) {
  const int slow = static_cast<int>(state.range(0));
  const double factor = static_cast<double>(state.range(1)) / 10;
  Tally tally;
  for (auto _ : state) {
    tally = Tally{};
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      tally.Add(Run(t::Bimodal(slow, factor, seed), seed), [&](int w) { return w < slow; });
    }
  }
  tally.Report(state, "fast_flags");
}

void BM_Persistent(benchmark::State& state) {
  const double factor = static_cast<double>(state.range(0)) / 10;
  const int64_t start = state.range(1);
  Tally tally;
  for (auto _ : state) {
    tally = Tally{};
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      tally.Add(Run(t::Persistent(factor, start, true, seed), seed),
                [](int w) { return w == 3 || w == 6; });
    }
  }
  tally.Report(state, "other_flags");
}

// Samples from `at` to worker `w`'s first event at or after it (1 = the step's first
// sample), or nullopt.
std::optional<double> StepLatency(const std::vector<Event>& events, int w, int64_t at) {
  for (const Event& e : events) {
    if (e.worker == w && e.iteration >= at) return static_cast<double>(e.iteration - at + 1);
  }
  return std::nullopt;
}

void BM_LateStep(benchmark::State& state) {
  constexpr int64_t kAt = 200;
  const double step = static_cast<double>(state.range(0)) / 10;
  std::vector<double> latency;
  int missed = 0, max_changes = 0;
  for (auto _ : state) {
    latency.clear();
    missed = max_changes = 0;
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      const std::vector<Event> events = Run(t::LateStep(3.0, step, kAt, seed), seed);
      max_changes = std::max(max_changes, t::EventsPerWorker(events, kWorkers)[2]);
      const std::optional<double> l = StepLatency(events, 2, kAt);
      if (l) latency.push_back(*l);
      missed += !l;
    }
  }
  state.counters["latency_median"] = t::MedianOrMinusOne(latency);
  state.counters["latency_max"] = latency.empty() ? -1 : *std::max_element(latency.begin(), latency.end());
  state.counters["missed"] = missed;
  state.counters["max_changes"] = max_changes;
}

void BM_Heterogeneous(benchmark::State& state) {
  const double spread = static_cast<double>(state.range(0)) / 100;
  const int slow_class = static_cast<int>(state.range(1));
  int flags = 0;
  for (auto _ : state) {
    flags = 0;
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      flags += static_cast<int>(Run(t::Heterogeneous(spread, slow_class, seed), seed).size());
    }
  }
  state.counters["flags"] = flags;
}

t::TraceSpec Production(int slow, uint64_t seed) {
  t::TraceSpec spec = t::RealJitter(seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> factor(3.0, 4.0);
  for (int w = 0; w < slow; ++w) {
    const double f = factor(rng);
    spec.episodes.push_back(t::Episode{w, 0, spec.iterations, f, f});
  }
  spec.episodes.push_back(t::Episode{0, 220, spec.iterations, 4.0, 4.0});
  return spec;
}

void BM_Production(benchmark::State& state) {
  const int slow = static_cast<int>(state.range(0));
  int events_total = 0, max_changes = 0;
  double latency_max = 0;
  for (auto _ : state) {
    events_total = max_changes = 0;
    latency_max = 0;
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      const std::vector<Event> events = Run(Production(slow, seed), seed);
      events_total += static_cast<int>(events.size());
      const std::vector<int> per = t::EventsPerWorker(events, kWorkers);
      max_changes = std::max(max_changes, *std::max_element(per.begin(), per.end()));
      latency_max = std::max(latency_max, StepLatency(events, 0, 220).value_or(1e9));
    }
  }
  state.counters["events"] = events_total;
  state.counters["max_changes"] = max_changes;
  state.counters["late_step_latency_max"] = latency_max;
}

}  // namespace

BENCHMARK(BM_Bimodal)
    ->ArgsProduct({{2, 5, 8}, {15, 20, 30, 40}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Persistent)
    ->ArgsProduct({{15, 20, 30, 40}, {0, 100}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LateStep)->Arg(15)->Arg(20)->Arg(40)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Heterogeneous)
    ->ArgsProduct({{120, 135}, {0, 2, 5, 8}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Production)->Arg(5)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
