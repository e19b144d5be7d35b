// Operator: the TrainingJob controller on Kubernetes (controller-runtime's Manager in
// small). It owns the informers (TrainingJobs, the jobs' pods, NodeAllocations), a
// rate-limited work queue of job keys, reconcile threads, the report endpoint (worker
// reports, authenticated by each job's token, feed the job's JobControlLoop) and the
// status writer (at most one status write per job per status_interval from reports,
// plus Kubernetes Events for straggler, mode, AMP, batch and reallocation decisions).
//
// Reconcile(key) is level-based: it re-reads the job and its pods from the caches,
// computes what should exist (job_objects.h) and applies it idempotently:
//   finalizer star.dev/node-allocations on the job; token Secret; headless Service;
//   pods (all desired pods are created together; AlreadyExists is fine; a pod the API
//   refuses for good rolls the created ones back and fails the job: all or none);
//   phase and conditions (DecidePhase), restarts with backoff (annotation
//   star.dev/restarts); NodeAllocations (the job's pods per node, recorded as the job's
//   wants; each node's NodeAllocation is its own work-queue key, "node:<name>", so the
//   changes of many jobs to one node coalesce into one write, with the reallocation
//   plans' overrides on top); on deletion the job's entries leave every NodeAllocation,
//   then the finalizer goes. Entries of a job that no longer exists are removed.
// Transient errors (Unavailable, DeadlineExceeded, Aborted, AlreadyExists races)
// requeue with per-key backoff; terminal errors (an invalid spec, a pod the API refuses)
// are written to status (phase Failed, condition Failed with the reason) and not retried.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "star/core/status.h"
#include "star/operator/control_loop.h"
#include "star/kube/client.h"
#include "star/operator/reconciler/metrics.h"

namespace star::op {

struct OperatorOptions {
  std::string ns;  // namespace to watch; default "" = all
  // Report endpoint HOST:PORT; default "127.0.0.1:0" (port 0 = a free port, see
  // report_port()); "" = no endpoint.
  std::string report_listen = "127.0.0.1:0";
  // STAR_CONTROLLER_URL given to pods; default "" = the endpoint's own URL.
  std::string report_url;
  // Reports reach status at most this often per job. Default 2 s.
  std::chrono::milliseconds status_interval{2000};
  int max_restarts = 3;  // pod-failure restarts before the job fails; default 3
  // First restart backoff; doubles per restart up to 5 min. Default 1 s.
  std::chrono::milliseconds restart_backoff{1000};
  int reconcile_threads = 4;  // default 4
  // How long Start waits for the informers' first list. Default 30 s.
  std::chrono::milliseconds sync_timeout{30000};
  LoopOptions loop;  // the job control loop's options; default LoopOptions{}
};

class Operator {
 public:
  // `client` and `metrics` must outlive the Operator. InvalidArgument naming a bad option.
  static StatusOr<std::unique_ptr<Operator>> Create(kube::Client* client, OperatorOptions options,
                                                    OperatorMetrics* metrics);
  ~Operator();  // Stop()
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  // Starts the informers and waits for their first list, then the report endpoint, the
  // reconcile threads and the status writer. Unavailable when the caches do not sync in
  // time or the endpoint cannot listen. Call once.
  [[nodiscard]] Status Start();
  // Stops every thread (in-flight reconciles finish); idempotent.
  void Stop();

  bool ready() const;         // started and caches synced
  int report_port() const;    // 0 without an endpoint
  std::string report_url() const;
  // Reconciles left to do (ready keys in the queue); for tests and benchmarks.
  size_t pending() const;

  // One reconcile of "namespace/name" (what the reconcile threads run).
  [[nodiscard]] Status Reconcile(const std::string& key);

 private:
  struct Impl;
  explicit Operator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace star::op
