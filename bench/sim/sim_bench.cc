// `star sim` speed: wall time of one simulated job run to its target, per job size. The
// simulator must run 1024 workers to the target in seconds.
//
// Scenario: the docs/ARCHITECTURE.md contract's (batch 32 per worker, phi 1000, 2000 updates
// at infinite batch, 2 ms per sample, 50 ms communication, 5% jitter; worker 3 keeps 40%
// of its CPU from 100 s to 400 s, worker 7 keeps 30% of its link throughout) at 64, 256
// and 1024 workers, under policy auto (the whole control loop: detection, AMP, batches,
// mode selection) and ssgd (the loop only observes). Each size runs 3 times; Google
// Benchmark prints the mean, median and standard deviation. Counters: the simulated
// TTA, updates, the largest iteration and the decisions.
#include <benchmark/benchmark.h>

#include "sim/scenario.h"
#include "sim/simulator.h"

namespace {

star::sim::Scenario Contract(int workers) {
  star::sim::Scenario s;
  s.workers = workers;
  s.batch_per_worker = 32;
  s.noise_scale = 1000;
  s.min_updates = 2000;
  s.compute_seconds_per_sample = 0.002;
  s.communication_seconds = 0.05;
  s.jitter = 0.05;
  s.episodes.push_back({.worker = 3, .start = 100, .end = 400, .cpu = 0.4, .bandwidth = {}, .delay = {}, .peer = {}});
  s.episodes.push_back({.worker = 7, .start = 0, .end = {}, .cpu = {}, .bandwidth = 0.3, .delay = {}, .peer = {}});
  s.seed = 1;
  return s;
}

void Run(benchmark::State& state, star::local::Policy policy) {
  const star::sim::Scenario s = Contract(static_cast<int>(state.range(0)));
  star::sim::SimResult last;
  for (auto _ : state) {
    auto r = star::sim::Simulate(s, policy);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    last = *r;
  }
  state.counters["tta_s"] = last.tta_seconds.value_or(-1);
  state.counters["updates"] = static_cast<double>(last.updates);
  state.counters["iterations"] = static_cast<double>(last.iterations);
  state.counters["decisions"] = static_cast<double>(last.decisions);
}

void BM_SimAuto(benchmark::State& state) { Run(state, star::local::Policy::kAuto); }
void BM_SimSsgd(benchmark::State& state) { Run(state, star::local::Policy::kSsgd); }

BENCHMARK(BM_SimAuto)->Arg(64)->Arg(256)->Arg(1024)->Iterations(1)->Repetitions(3)
    ->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_SimSsgd)->Arg(64)->Arg(256)->Arg(1024)->Iterations(1)->Repetitions(3)
    ->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
