// The prometheus-cpp adapter: the Exposer's exceptions become a Status here.
#include "star/shim/worker_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace star::shim {
namespace {

const prometheus::Histogram::BucketBoundaries& SecondsBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60};
  return kBuckets;
}

prometheus::Histogram& AddHistogram(prometheus::Registry& registry, const std::string& name,
                                    const std::string& help, const prometheus::Labels& labels) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add(
      labels, SecondsBuckets());
}

prometheus::Gauge& AddGauge(prometheus::Registry& registry, const std::string& name,
                            const std::string& help, const prometheus::Labels& labels) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(labels);
}

// The labels of every series: namespace and trainingjob of job "<namespace>/<name>" (a
// job without "/": trainingjob only), worker, and node when known.
prometheus::Labels SeriesLabels(const std::string& job, int worker, const std::string& node) {
  prometheus::Labels labels = {{"worker", std::to_string(worker)}};
  const size_t slash = job.find('/');
  labels["trainingjob"] = slash == std::string::npos ? job : job.substr(slash + 1);
  if (slash != std::string::npos) labels["namespace"] = job.substr(0, slash);
  if (!node.empty()) labels["node"] = node;
  return labels;
}

}  // namespace

struct WorkerMetrics::Impl {
  // Declared before the exposer, so the exposer (which scrapes it) goes first.
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Histogram* iteration = nullptr;
  prometheus::Histogram* compute = nullptr;
  prometheus::Histogram* communication = nullptr;
  prometheus::Histogram* wait = nullptr;
  prometheus::Gauge* amp = nullptr;
  prometheus::Gauge* batch = nullptr;
  prometheus::Counter* iterations = nullptr;
  std::unique_ptr<prometheus::Exposer> exposer;
  int port = 0;
};

WorkerMetrics::WorkerMetrics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WorkerMetrics::~WorkerMetrics() = default;

StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Start(const std::string& bind_address,
                                                              const std::string& job,
                                                              int worker,
                                                              const std::string& node) {
  if (worker < 0) {
    return Status::InvalidArgument("worker: must be >= 0, got " + std::to_string(worker));
  }
  auto impl = std::make_unique<Impl>();
  const prometheus::Labels labels = SeriesLabels(job, worker, node);
  prometheus::Registry& r = *impl->registry;
  try {
    impl->iteration = &AddHistogram(
        r, "star_worker_iteration_seconds",
        "Iteration time excluding waiting on peers (compute + communication), seconds", labels);
    impl->compute = &AddHistogram(r, "star_worker_compute_seconds",
                                  "Compute time per iteration (forward, backward, optimizer), seconds",
                                  labels);
    impl->communication = &AddHistogram(
        r, "star_worker_communication_seconds",
        "Own communication time per iteration, waiting on peers excluded, seconds", labels);
    impl->wait = &AddHistogram(r, "star_worker_wait_seconds",
                               "Time per iteration blocked on slower peers, seconds", labels);
    impl->amp = &AddGauge(r, "star_worker_amp_enabled", "1 if mixed precision is on", labels);
    impl->batch = &AddGauge(r, "star_worker_local_batch_size", "Samples per iteration on this worker",
                            labels);
    impl->iterations = &prometheus::BuildCounter()
                            .Name("star_worker_iterations_total")
                            .Help("Iterations run by this worker")
                            .Register(r)
                            .Add(labels);
    impl->exposer = std::make_unique<prometheus::Exposer>(bind_address, /*num_threads=*/1);
    impl->exposer->RegisterCollectable(impl->registry);
    std::vector<int> ports = impl->exposer->GetListeningPorts();
    if (ports.empty()) return Status::Unavailable("metrics: no listening port on " + bind_address);
    impl->port = ports.front();
  } catch (const std::exception& e) {
    return Status::Unavailable("metrics: cannot listen on \"" + bind_address + "\": " + e.what());
  }
  return std::unique_ptr<WorkerMetrics>(new WorkerMetrics(std::move(impl)));
}

void WorkerMetrics::Observe(const IterationSample& s) {
  impl_->iteration->Observe(s.iteration_seconds());
  impl_->compute->Observe(s.compute_seconds);
  impl_->communication->Observe(s.communication_seconds);
  impl_->wait->Observe(s.wait_seconds);
  impl_->amp->Set(s.info.amp ? 1 : 0);
  impl_->batch->Set(s.info.local_batch);
  impl_->iterations->Increment();
}

int WorkerMetrics::port() const { return impl_->port; }

}  // namespace star::shim
