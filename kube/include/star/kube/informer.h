// Informer: a list+watch loop keeping an in-memory cache of one resource (client-go's
// pattern). The work queue is workqueue.h, leader election leader_election.h.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/kube/client.h"

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

}  // namespace star::kube
