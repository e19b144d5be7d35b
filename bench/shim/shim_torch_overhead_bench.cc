// The shim's per-iteration overhead in the Fashion-MNIST trainer, next to the iteration it
// rides on: what the shim adds to a LibTorch training step is copying gradients into a flat
// buffer, the engine's exchange + SGD update, copying parameters back, and its timer.
// Compared with LibTorch's own SGD step (what a trainer without the shim would run).
#include <chrono>
#include <vector>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "star/shim/local_collective.h"
#include "star/shim/sync_engine.h"
#include "star/shim/timing.h"
#include "star/shim/torch_model.h"

namespace {

using namespace star::shim;

void FillGradients(FashionCnn& model) {
  for (auto& p : model->parameters()) p.mutable_grad() = torch::randn_like(p);
}

// Baseline: LibTorch's SGD (momentum 0.9) step on the model.
void BM_TorchSgdStep(benchmark::State& state) {
  torch::set_num_threads(1);
  FashionCnn model;
  FillGradients(model);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.02).momentum(0.9));
  for (auto _ : state) sgd.step();
}

// The shim's path: gradients -> flat, engine Step (1 worker: the update), flat -> params.
void BM_ShimStep(benchmark::State& state) {
  torch::set_num_threads(1);
  FashionCnn model;
  FillGradients(model);
  const int64_t n = ParameterCount(*model);
  std::vector<float> params(n), grad(n);
  if (!ParametersToFlat(*model, params).ok()) state.SkipWithError("flatten");
  auto engine = SyncEngine::Create(std::move(NewLocalGroup(1, std::chrono::seconds(10))[0]), params,
                                   SgdOptions{0.02f, 0.9f, 0.0f});
  if (!engine.ok()) state.SkipWithError("engine");
  IterationTimer timer;
  for (auto _ : state) {
    (void)timer.BeginCommunication();
    (void)GradientsToFlat(*model, grad);
    auto step = (*engine)->Step(grad, 64);
    benchmark::DoNotOptimize(step);
    (void)FlatToParameters((*engine)->params(), *model);
    (void)timer.EndCommunication();
    IterationInfo info;
    (void)timer.EndIteration(info);
    if (timer.pending_iterations() >= 10) (void)timer.TakeReport();
  }
  state.counters["params"] = static_cast<double>(n);
}

BENCHMARK(BM_TorchSgdStep)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ShimStep)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
