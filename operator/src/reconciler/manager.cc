#include "star/operator/reconciler/manager.h"

#include "reconciler/helpers.h"

namespace star::op {

using Clock = std::chrono::steady_clock;

StatusOr<std::unique_ptr<Manager>> Manager::Create(kube::Client* client, ManagerOptions options,
                                                   OperatorMetrics* metrics) {
  if (client == nullptr || metrics == nullptr) return Status::InvalidArgument("client/metrics: required");
  if (options.reconcile_threads < 1) return Status::InvalidArgument("reconcile_threads: must be >= 1");
  if (options.stuck_reconcile_after.count() <= 0) {
    return Status::InvalidArgument("stuck_reconcile_after: must be > 0 ms");
  }
  return std::unique_ptr<Manager>(new Manager(client, std::move(options), metrics));
}

Manager::Manager(kube::Client* client, ManagerOptions options, OperatorMetrics* metrics)
    : client_(client),
      options_(std::move(options)),
      metrics_(metrics),
      cache_(client, options_.ns),
      liveness_(options_.reconcile_threads, options_.stuck_reconcile_after) {}

Manager::~Manager() { Stop(); }

void Manager::AddController(std::string name, std::function<bool(const std::string&)> owns,
                            Reconciler* reconciler) {
  controllers_.push_back({std::move(name), std::move(owns), reconciler});
}

void Manager::AddRunnable(Runnable* runnable) { runnables_.push_back(runnable); }

void Manager::Enqueue(const std::string& key) { queue_.Add(key); }

Status Manager::ServeProbes() {
  if (options_.metrics_listen.empty()) return Status::Ok();
  kube::ProbeHandlers handlers{[this] { return metrics_->Serialize(); },
                               [this]() -> std::optional<std::string> {
                                 if (ready()) return std::nullopt;
                                 return "not ready: caches not synced or not leading";
                               },
                               [](const std::string& m) { Log(m); },
                               [this] { return not_alive(); }};
  STAR_ASSIGN_OR_RETURN(probes_, kube::ProbeServer::Start(options_.metrics_listen, handlers, "--metrics-listen"));
  return Status::Ok();
}

Status Manager::Start() {
  STAR_RETURN_IF_ERROR(cache_.Start(options_.sync_timeout));
  for (Runnable* r : runnables_) STAR_RETURN_IF_ERROR(r->Start());
  for (int i = 0; i < options_.reconcile_threads; ++i) threads_.emplace_back([this, i] { Worker(i); });
  started_ = true;
  return Status::Ok();
}

void Manager::StartLeading(const std::function<void(const Status&)>& on_started) {
  std::lock_guard lock(start_mu_);
  if (stopping_) return;  // won the lease while stopping: stopped already
  on_started(Start());
}

void Manager::Run(std::function<void(const Status&)> on_started, std::function<void()> on_lost) {
  if (!options_.leader_election) return StartLeading(on_started);
  elector_ = std::make_unique<kube::LeaderElector>(
      client_, *options_.leader_election, [this, on_started] { StartLeading(on_started); },
      [this, on_lost] {
        if (stopping_) return;  // a stop gives the lease up: no loss
        lost_ = true;
        on_lost();
      });
  elector_->Start();
}

void Manager::Stop() {
  {
    std::lock_guard lock(start_mu_);
    if (stopping_.exchange(true)) return;
    queue_.ShutDown();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    for (auto it = runnables_.rbegin(); it != runnables_.rend(); ++it) (*it)->Stop();
    cache_.Stop();
  }
  if (elector_) elector_->Stop();
  probes_.reset();
}

bool Manager::ready() const { return started_ && !stopping_ && !lost_; }
std::optional<std::string> Manager::not_alive() const { return liveness_.Stuck(Clock::now()); }
size_t Manager::pending() const { return queue_.Len(); }

StatusOr<std::chrono::milliseconds> Manager::Reconcile(const std::string& key) {
  for (const Controller& c : controllers_) {
    if (c.owns(key)) return c.reconciler->Reconcile(key);
  }
  return Status::InvalidArgument("key \"" + key + "\": no controller owns it");
}

void Manager::Worker(int index) {
  while (!stopping_) {
    auto key = queue_.Get(std::chrono::milliseconds(200));
    if (!key) continue;
    const auto start = Clock::now();
    liveness_.Begin(index, *key, start);
    const StatusOr<std::chrono::milliseconds> r = Reconcile(*key);
    liveness_.End(index);
    Finish(*key, r, std::chrono::duration<double>(Clock::now() - start).count());
    queue_.Done(*key);
  }
}

// Forget on success (with a requeue when asked); backoff on errors.
void Manager::Finish(const std::string& key, const StatusOr<std::chrono::milliseconds>& r, double seconds) {
  if (r.ok()) {
    queue_.Forget(key);
    if (r->count() > 0) queue_.AddAfter(key, *r);
    metrics_->Reconciled(r->count() > 0 ? "requeue" : "success", seconds);
  } else if (RetryableApiError(r.status()) || r.status().code() == StatusCode::kNotFound) {
    queue_.AddRateLimited(key);
    metrics_->Reconciled("requeue", seconds);
  } else {
    Log("reconcile " + key + ": " + r.status().ToString());
    queue_.AddRateLimited(key);
    metrics_->Reconciled("error", seconds);
  }
}

}  // namespace star::op
