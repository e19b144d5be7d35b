// Informer: a list+watch loop keeping an in-memory cache of one resource, and the
// rate-limited work queue controllers consume (client-go's pattern).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/operator/kube/client.h"

namespace star::kube {

// "namespace/name" (or "name" for cluster-scoped objects).
std::string KeyOf(const nlohmann::json& object);

struct InformerOptions {
  std::string ns;              // "" = all namespaces
  std::string label_selector;  // "" = all
  std::chrono::seconds watch_timeout{300};
  // Full re-list period even without errors (level-based safety net); 0 = never.
  std::chrono::seconds resync{0};
  std::chrono::milliseconds relist_backoff{200};  // after an error, doubling up to 10 s
};

// Runs list, then watch from the list's resourceVersion; on 410 Gone (or any watch
// error, or a stream the server ends before its timeout) re-lists after a backoff
// (relist_backoff, doubling up to 10 s; reset by a watch that delivers events) and reports
// the difference to the cache as events: ADDED, MODIFIED (resourceVersion changed),
// DELETED (with the last cached object). A stream ended at its timeout is re-watched from
// the last resourceVersion seen (BOOKMARKs advance it; they are not passed to the handler).
// Handlers run on the informer's thread, one at a time, after the cache is updated; an
// exception a handler throws is dropped (handlers report their own errors).
// Borrows `client`, which must outlive it. Start once; Stop is idempotent, ends an open
// watch within about 100 ms and returns when the thread has ended (a list in flight is
// waited for: at most the client's request timeout and retries). Start after Stop does
// nothing. List items get apiVersion and kind filled in from `resource` when missing.
class Informer {
 public:
  using Handler = std::function<void(const std::string& type, const nlohmann::json& object)>;
  Informer(Client* client, ResourceRef resource, InformerOptions options, Handler handler);
  ~Informer();  // Stop()
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void Start();
  void Stop();
  // Blocks until the first list is in the cache (or the timeout): true if synced.
  bool WaitForSync(std::chrono::milliseconds timeout);
  bool synced() const;
  // Cache reads (copies; thread-safe).
  std::optional<nlohmann::json> Get(const std::string& key) const;
  std::vector<nlohmann::json> List() const;
  // Number of lists done (1 after the first sync; more after 410s / errors / resyncs).
  int lists() const;

 private:
  void Run();
  Client* client_;
  ResourceRef resource_;
  InformerOptions options_;
  Handler handler_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, nlohmann::json> cache_;
  bool synced_ = false;
  int lists_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A deduplicating, rate-limited work queue of keys. A key added while queued is queued
// once; a key added while being processed is queued again after Done(). Failed keys are
// re-added with per-key exponential backoff (AddRateLimited) until Forget().
class WorkQueue {
 public:
  struct Options {
    std::chrono::milliseconds base_delay{50};
    std::chrono::milliseconds max_delay{30000};
  };
  WorkQueue() : WorkQueue(Options()) {}
  explicit WorkQueue(Options options);
  ~WorkQueue();  // ShutDown()

  void Add(const std::string& key);
  void AddAfter(const std::string& key, std::chrono::milliseconds delay);
  void AddRateLimited(const std::string& key);  // delay = base * 2^failures, capped
  void Forget(const std::string& key);          // resets the key's failure count
  int Failures(const std::string& key) const;
  // The delay the next AddRateLimited(key) would use (base * 2^Failures(key), capped).
  std::chrono::milliseconds NextBackoff(const std::string& key) const;
  // Next key; blocks up to `timeout`. nullopt on timeout or after ShutDown.
  std::optional<std::string> Get(std::chrono::milliseconds timeout);
  void Done(const std::string& key);
  void ShutDown();
  size_t Len() const;  // keys ready (not delayed, not processing)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Leader election on a coordination.k8s.io/v1 Lease (client-go's resourcelock): acquire
// when the lease is absent, held by us, free (holderIdentity ""), or expired: held by
// someone else whose record this process has seen unchanged for the lease's
// leaseDurationSeconds (measured on the local monotonic clock, as client-go does, so clock
// skew between nodes cannot steal a live lease; renewTime is written for people). Renew
// every `renew_period`; retry every `retry_period` while not leading or after a failed
// renewal. Leading ends (on_stopped_leading) when another holder is seen or no renewal
// succeeded for 2/3 of lease_duration (the renew deadline: checked before each attempt and
// woken for, so before another elector may take the lease). Callbacks run on the elector's thread and must not
// block. Stop(): joins the thread, then, if leading, calls on_stopped_leading and releases
// the lease (holder "", so another elector takes it at once). An empty identity becomes
// hostname_pid. Requests go through a connection of its own made from client->options(),
// without retries and with a request timeout of at most half of (renew deadline -
// renew_period), at least 100 ms, so that a renewal started on time ends by the deadline.
struct LeaderElectionOptions {
  std::string ns = "default";
  std::string name = "star-operator";
  std::string identity;  // required, unique per process (e.g. hostname_pid)
  std::chrono::seconds lease_duration{15};
  std::chrono::seconds renew_period{5};
  std::chrono::milliseconds retry_period{2000};
};

class LeaderElector {
 public:
  LeaderElector(Client* client, LeaderElectionOptions options,
                std::function<void()> on_started_leading, std::function<void()> on_stopped_leading);
  ~LeaderElector();  // Stop(): releases the lease if held (sets holder empty)
  void Start();
  void Stop();
  bool leading() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace star::kube
