// Manager: runs the operator's controllers (controller-runtime's manager in small). It
// owns the cache (cache.h: the informers), borrows the client, holds the leader lease
// when asked, serves /metrics /healthz (alive: reconciling is not stuck, liveness.h)
// /readyz, and runs one deduplicating,
// rate-limited work queue whose keys are dispatched to the controller that owns them,
// on `reconcile_threads` threads. Runnables (controller.h) start once the caches synced.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "star/core/status.h"
#include "star/kube/client.h"
#include "star/kube/leader_election.h"
#include "star/kube/probe_server.h"
#include "star/kube/workqueue.h"
#include "star/operator/reconciler/cache.h"
#include "star/operator/reconciler/controller.h"
#include "star/operator/reconciler/liveness.h"
#include "star/operator/reconciler/metrics.h"

namespace star::op {

struct ManagerOptions {
  std::string ns;             // namespace to watch; default "" = all
  int reconcile_threads = 4;  // default 4
  // How long Start waits for the informers' first list. Default 30 s.
  std::chrono::milliseconds sync_timeout{30000};
  // HOST:PORT of /metrics /healthz /readyz (ServeProbes); default "" = none.
  std::string metrics_listen;
  // The Lease to hold while reconciling (Run); default nullopt = no leader election.
  std::optional<kube::LeaderElectionOptions> leader_election;
  // /healthz fails once one reconcile has run this long (liveness.h: a reconcile waiting
  // on a slow API server ends well within it). Default 5 minutes.
  std::chrono::milliseconds stuck_reconcile_after{std::chrono::minutes(5)};
};

class Manager {
 public:
  // `client` and `metrics` must outlive the Manager. InvalidArgument naming a bad option.
  static StatusOr<std::unique_ptr<Manager>> Create(kube::Client* client, ManagerOptions options,
                                                   OperatorMetrics* metrics);
  ~Manager();  // Stop()
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  kube::Client* client() const { return client_; }
  Cache& cache() { return cache_; }
  OperatorMetrics* metrics() const { return metrics_; }
  const ManagerOptions& options() const { return options_; }

  // Keys for which `owns` is true are reconciled by `reconciler` (the first controller
  // added that owns a key gets it). `reconciler` must outlive the Manager. Before Start.
  void AddController(std::string name, std::function<bool(const std::string&)> owns,
                     Reconciler* reconciler);
  // Started (in the order added) after the caches synced; stopped in reverse order.
  // `runnable` must outlive the Manager. Before Start.
  void AddRunnable(Runnable* runnable);
  // Queues `key` for its controller (deduplicated). Thread-safe.
  void Enqueue(const std::string& key);

  // Serves /metrics (the metrics), /healthz (not_alive()) and /readyz (ready()) on
  // options.metrics_listen; nothing when it is "". Unavailable when it cannot listen.
  [[nodiscard]] Status ServeProbes();
  // Starts the cache and waits for its first lists, then the runnables, then the
  // reconcile threads. Unavailable when the caches do not sync in time; a runnable's
  // error. Call once.
  [[nodiscard]] Status Start();
  // Start now, or (with leader election) once the lease is won. `on_started` receives
  // Start's outcome; `on_lost` is called when the lease is lost while not stopping. Both
  // run on the elector's thread when electing and must not block. Call once.
  void Run(std::function<void(const Status&)> on_started, std::function<void()> on_lost);
  // Stops reconciles (in-flight ones finish), runnables and the cache, then gives the
  // lease up, then the probes. Idempotent.
  void Stop();

  bool ready() const;      // started, not stopping, still leading
  // Why the Manager is not alive: a reconcile stuck past options.stuck_reconcile_after
  // (ReconcileLiveness); nullopt while alive.
  std::optional<std::string> not_alive() const;
  size_t pending() const;  // ready keys in the queue; for tests and benchmarks
  // One reconcile of `key` by its controller (what the reconcile threads run).
  [[nodiscard]] StatusOr<std::chrono::milliseconds> Reconcile(const std::string& key);

 private:
  struct Controller {
    std::string name;
    std::function<bool(const std::string&)> owns;
    Reconciler* reconciler;
  };
  Manager(kube::Client* client, ManagerOptions options, OperatorMetrics* metrics);
  void Worker(int index);
  void Finish(const std::string& key, const StatusOr<std::chrono::milliseconds>& r, double seconds);
  void StartLeading(const std::function<void(const Status&)>& on_started);

  kube::Client* client_;
  ManagerOptions options_;
  OperatorMetrics* metrics_;
  Cache cache_;
  kube::WorkQueue queue_;
  ReconcileLiveness liveness_;
  std::vector<Controller> controllers_;
  std::vector<Runnable*> runnables_;
  std::vector<std::thread> threads_;
  std::unique_ptr<kube::ProbeServer> probes_;
  std::unique_ptr<kube::LeaderElector> elector_;
  std::mutex start_mu_;  // Start (from the elector) against Stop
  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};
  std::atomic<bool> lost_{false};
};

}  // namespace star::op
