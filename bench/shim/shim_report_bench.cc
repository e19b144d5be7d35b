// Per-iteration cost of the shim's instrumentation: IterationTimer phases and
// WorkerMetrics::Observe (what every training iteration pays), and the gradient norm.
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include "star/shim/timing.h"
#include "star/shim/worker_metrics.h"

namespace {

using star::shim::IterationInfo;
using star::shim::IterationSample;
using star::shim::IterationTimer;

// One iteration's timer calls: compute, communication with a reported wait, end;
// a report every 10 iterations.
IterationSample TimeOneIteration(IterationTimer& timer, int64_t i) {
  (void)timer.BeginCompute();
  (void)timer.EndCompute();
  (void)timer.BeginCommunication();
  (void)timer.AddWait(1e-4);
  (void)timer.EndCommunication();
  IterationInfo info;
  info.iteration = i;
  info.local_batch = 64;
  info.local_grad_sq_norm = 1.0;
  star::StatusOr<IterationSample> s = timer.EndIteration(info);
  if (timer.pending_iterations() == 10) benchmark::DoNotOptimize(timer.TakeReport());
  return s.ok() ? *s : IterationSample{};
}

void BM_IterationTimer(benchmark::State& state) {
  IterationTimer timer;
  int64_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(TimeOneIteration(timer, i++));
}
BENCHMARK(BM_IterationTimer);

void BM_IterationTimerAndObserve(benchmark::State& state) {
  auto metrics = star::shim::WorkerMetrics::Start("127.0.0.1:0", "bench", 0);
  if (!metrics.ok()) {
    state.SkipWithError(metrics.status().ToString().c_str());
    return;
  }
  IterationTimer timer;
  int64_t i = 0;
  for (auto _ : state) (*metrics)->Observe(TimeOneIteration(timer, i++));
}
BENCHMARK(BM_IterationTimerAndObserve);

void BM_SquaredL2Norm(benchmark::State& state) {
  std::vector<float> grad(static_cast<size_t>(state.range(0)), 0.5f);
  for (auto _ : state) benchmark::DoNotOptimize(star::shim::SquaredL2Norm(grad));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}
BENCHMARK(BM_SquaredL2Norm)->Arg(1 << 20)->Arg(11 << 20);  // 1M; ~ResNet-18 (11.7M)

}  // namespace

BENCHMARK_MAIN();
