// Resource reallocation planner on clusters of 100 and 1000 pods (10 pods per node,
// 10 jobs, the requesting job wants extra CPU and bandwidth on every one of its pods).
#include <random>
#include <string>

#include <benchmark/benchmark.h>

#include "star/core/resources/planner.h"

namespace {

using namespace star::resources;

struct Input {
  ClusterState state;
  ReallocationRequest request;
};

Input Cluster(int pods) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> frac(0.5, 1.0), sens(0.2, 3.0), prog(0.0, 1.0);
  Input in;
  const int nodes = pods / 10, jobs = 10;
  for (int n = 0; n < nodes; ++n) {
    in.state.nodes.push_back({"node-" + std::to_string(n), {64000, 25'000'000'000}});
  }
  for (int j = 0; j < jobs; ++j) {
    in.state.jobs.push_back({"job-" + std::to_string(j), j % 3 != 0, 1.0, sens(rng), sens(rng), prog(rng)});
  }
  for (int p = 0; p < pods; ++p) {
    Pod pod;
    pod.namespace_ = "default";
    pod.name = pod.uid = "pod-" + std::to_string(p);
    pod.node = "node-" + std::to_string(p % nodes);
    pod.job = "job-" + std::to_string(p % jobs);
    pod.request = {1000, 500'000'000};
    pod.allocation = {5000, 2'000'000'000};
    pod.guaranteed = p % 4 == 0;
    pod.iteration_seconds = frac(rng);
    in.state.pods.push_back(pod);
    if (pod.job == "job-0") in.request.demands.push_back({pod.uid, {4000, 1'000'000'000}});
  }
  in.request.job = "job-0";
  in.request.sync_loss_seconds = 30;
  in.request.horizon_seconds = 60;
  return in;
}

void BM_PlanReallocation(benchmark::State& state) {
  const Input in = Cluster(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto plan = PlanReallocation(in.state, in.request);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["pods"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_PlanReallocation)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
