// Per-report cost of the streaming straggler detector (target: < 1 us per Observe).
//
// BM_DetectorObserve/<workers>/<straggler>: feeds pre-generated rounds (every worker
// reports once per iteration, 5% lognormal noise on 80 ms compute + 20 ms communication)
// into a warmed-up detector; items = reports, so "items_per_second" inverts to the
// per-report time. straggler=1 slows worker 0's compute 2x for the whole trace, so it is
// flagged and re-evaluated every round; straggler=0 is noise only.
#include <cstdint>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "star/core/detect/detector.h"

namespace {

using star::detect::Detector;
using star::detect::DetectorOptions;
using star::detect::Event;
using star::detect::Rule;
using star::detect::Sample;

constexpr int kRounds = 64;

std::vector<Sample> MakeRounds(int workers, bool straggler) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> noise(-0.05 * 0.05 / 2, 0.05);
  std::vector<Sample> out;
  out.reserve(static_cast<size_t>(kRounds) * static_cast<size_t>(workers));
  for (int it = 0; it < kRounds; ++it) {
    for (int w = 0; w < workers; ++w) {
      const double slow = straggler && w == 0 ? 2.0 : 1.0;
      out.push_back(Sample{it, w, 0.080 * slow * noise(rng), 0.020 * noise(rng)});
    }
  }
  return out;
}

void BM_DetectorObserve(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  const bool straggler = state.range(1) != 0;
  const auto rule = static_cast<Rule>(state.range(2));
  const std::vector<Sample> rounds = MakeRounds(workers, straggler);
  DetectorOptions options;
  options.rule = rule;
  Detector detector(options);
  std::vector<Event> events;
  events.reserve(1024);
  // Warm-up: fill every window and allocate everything once.
  int64_t offset = 0;
  for (Sample s : rounds) detector.Observe(s, &events);
  offset += kRounds;
  size_t i = 0;
  for (auto _ : state) {
    Sample s = rounds[i];
    s.iteration += offset;
    detector.Observe(s, &events);
    if (++i == rounds.size()) {
      i = 0;
      offset += kRounds;
    }
    if (events.size() > 512) events.clear();
  }
  benchmark::DoNotOptimize(events.data());
  state.SetItemsProcessed(state.iterations());
  state.counters["stragglers"] = static_cast<double>(detector.Stragglers().size());
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"workers", "straggler", "rule"});
  for (int rule : {0, 1, 2, 3}) {
    for (int workers : {8, 64, 512, 4096}) {
      for (int straggler : {0, 1}) {
        if (rule != 0 && straggler == 0) continue;  // other rules: one straggler case
        b->Args({workers, straggler, rule});
      }
    }
  }
}

BENCHMARK(BM_DetectorObserve)->Apply(Args);

}  // namespace

BENCHMARK_MAIN();
