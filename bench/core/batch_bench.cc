// PlanBatches (BOA, exact min-max batch split) at 8..4096 workers, G = 256 * n.
#include <random>

#include <benchmark/benchmark.h>

#include "star/core/batch/planner.h"

namespace {

star::batch::PlanInput Instance(int n) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> alpha(0.0005, 0.004), beta(0.0, 0.05);
  star::batch::PlanInput in;
  in.min_batch = 8;
  in.global_batch = 256 * static_cast<int64_t>(n);
  for (int i = 0; i < n; ++i) in.workers.push_back({alpha(rng), beta(rng)});
  return in;
}

void BM_PlanBatches(benchmark::State& state) {
  const auto in = Instance(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto plan = star::batch::PlanBatches(in);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["workers"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_PlanBatches)->Arg(8)->Arg(64)->Arg(512)->Arg(4096)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
