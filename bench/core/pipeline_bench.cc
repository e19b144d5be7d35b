// The pipeline model (star/core/pipeline/schedule.h): the cost of choosing warm-up depths
// (ChooseWarmup: the rule, then the greedy search, each step an event simulation) and
// what the model predicts it wins.
//
// BM_ChooseWarmup/<stages>/<micro-batches>/<slowdown>: stages of 10 ms forwards and 20 ms
// backwards, links of 1 ms each way, the link after stage 1 `slowdown` times slower, no
// memory bound beyond M. Counters: static_ms (1F1B's iteration), adapted_ms (the
// chosen depths'), speedup = static / adapted, depth0 (the first stage's warm-up).
#include <benchmark/benchmark.h>

#include "star/core/pipeline/schedule.h"

namespace {

using star::pipeline::PipelineCosts;

PipelineCosts Costs(int stages, int micro, double slowdown) {
  PipelineCosts c;
  c.stages.assign(static_cast<size_t>(stages), {0.010, 0.020});
  c.links.assign(static_cast<size_t>(stages - 1), {0.001, 0.001});
  c.links[1] = {0.001 * slowdown, 0.001 * slowdown};
  c.micro_batches = micro;
  return c;
}

void BM_ChooseWarmup(benchmark::State& state) {
  const PipelineCosts c = Costs(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                                static_cast<double>(state.range(2)));
  star::pipeline::Plan plan;
  for (auto _ : state) {
    auto p = star::pipeline::ChooseWarmup(c, std::nullopt);
    if (!p.ok()) {
      state.SkipWithError(p.status().message().c_str());
      return;
    }
    plan = *p;
    benchmark::DoNotOptimize(plan);
  }
  state.counters["static_ms"] = plan.static_seconds * 1e3;
  state.counters["adapted_ms"] = plan.predicted_seconds * 1e3;
  state.counters["speedup"] = plan.static_seconds / plan.predicted_seconds;
  state.counters["depth0"] = plan.warmup.front();
}
BENCHMARK(BM_ChooseWarmup)
    ->ArgsProduct({{4}, {8}, {1, 4, 16, 40}})
    ->ArgsProduct({{8}, {32}, {1, 16}})
    ->ArgsProduct({{16}, {64}, {16}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
