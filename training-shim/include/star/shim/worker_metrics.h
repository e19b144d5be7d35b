// WorkerMetrics: a worker's Prometheus endpoint (GET /metrics), the star_worker_*
// metrics of docs/ARCHITECTURE.md, every series labelled {namespace, trainingjob, worker,
// node}: the TrainingJob's namespace and name (job "<namespace>/<name>"; a job without
// "/" has no namespace label), the worker's rank and the node it runs on (none when
// unknown). Not `job`: that is Prometheus's own target label.
//
//   star_worker_iteration_seconds       histogram  compute + communication (t_i; wait
//                                                  excluded, as api::WorkerReport)
//   star_worker_compute_seconds         histogram
//   star_worker_communication_seconds   histogram
//   star_worker_wait_seconds            histogram
//   star_worker_amp_enabled             gauge      0/1, the last iteration's
//   star_worker_local_batch_size        gauge      the last iteration's
//   star_worker_iterations_total        counter
//
// Histograms, not gauges, for the times: a scrape every 15 s sees hundreds of
// iterations, and their distribution (rate of _sum / _count, quantiles) is what a
// straggler shows in. Buckets (seconds): 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25
// 0.5 1 2.5 5 10 25 60 (+Inf). Before the first Observe every series exists at 0.
#pragma once

#include <memory>
#include <string>

#include "star/core/status.h"
#include "star/shim/timing.h"

namespace star::shim {

class WorkerMetrics {
 public:
  // Listens on bind_address ("host:port"; port 0 picks a free port, see port()).
  // job is "<namespace>/<name>"; node "" = unknown (no node label).
  // Unavailable if it cannot listen; InvalidArgument naming "worker" if worker < 0.
  static StatusOr<std::unique_ptr<WorkerMetrics>> Start(const std::string& bind_address,
                                                        const std::string& job, int worker,
                                                        const std::string& node = "");
  // Stops the endpoint.
  ~WorkerMetrics();
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  // Records one iteration. Thread-safe; never fails; a few hundred ns.
  void Observe(const IterationSample& sample);

  // The port the endpoint listens on.
  int port() const;

 private:
  struct Impl;
  explicit WorkerMetrics(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace star::shim
