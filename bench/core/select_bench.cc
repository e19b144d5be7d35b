// Select() latency: the controller re-decides every few report rounds, so a decision
// must stay far below an iteration. Target: < 1 ms at 4096 workers.
//
// Inputs (fixed seed): times uniform in [0.9, 1.1] s with about 5% of the workers 2-3x
// slower; B = 32. "Stragglers" uses phi = 2048 (k* is near n); "ZeroNoise" uses phi = 0,
// which makes k* = 1 (the fixed-k simulation then needs 16 rounds of n single-gradient
// updates: the costliest case); "Equal" has no stragglers (SSGD, no simulation).
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "star/core/select/selector.h"

namespace {

star::select::SelectionInput MakeInput(int n, double phi, bool stragglers) {
  std::mt19937_64 rng(static_cast<uint64_t>(n) * 7919);
  std::uniform_real_distribution<double> base(0.9, 1.1);
  std::uniform_real_distribution<double> slow(2.0, 3.0);
  star::select::SelectionInput in;
  in.architecture = star::api::Architecture::kParameterServer;
  in.batch_per_worker = 32;
  in.noise_scale = phi;
  in.iteration_seconds.resize(n);
  for (double& t : in.iteration_seconds) t = stragglers ? base(rng) : 1.0;
  if (stragglers) {
    for (int j = 0; j < std::max(1, n / 20); ++j) in.iteration_seconds[rng() % n] *= slow(rng);
  }
  return in;
}

void Run(benchmark::State& state, double phi, bool stragglers) {
  const auto in = MakeInput(static_cast<int>(state.range(0)), phi, stragglers);
  for (auto _ : state) {
    auto s = star::select::Select(in);
    benchmark::DoNotOptimize(s);
  }
  auto s = star::select::Select(in);
  state.counters["k"] = s.ok() ? s->k : -1;
  state.counters["mode"] = s.ok() ? static_cast<double>(s->mode) : -1;
}

void BM_SelectStragglers(benchmark::State& state) { Run(state, 2048, true); }
void BM_SelectZeroNoise(benchmark::State& state) { Run(state, 0, true); }
void BM_SelectEqual(benchmark::State& state) { Run(state, 2048, false); }

BENCHMARK(BM_SelectStragglers)->Arg(8)->Arg(64)->Arg(512)->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SelectZeroNoise)->Arg(8)->Arg(64)->Arg(512)->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SelectEqual)->Arg(8)->Arg(64)->Arg(512)->Arg(4096)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
