// Informer: a list+watch loop keeping an in-memory cache of one resource (client-go's
// pattern). The work queue is workqueue.h, leader election leader_election.h.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/kube/client.h"

namespace star::kube {

// "namespace/name" (or "name" for cluster-scoped objects).
std::string KeyOf(const nlohmann::json& object);

struct InformerOptions {
  std::string ns;              // "" = all namespaces
  std::string label_selector;  // "" = all
  // "" = all; e.g. "metadata.name=node-1". Sent on every list and watch.
  std::string field_selector;
  std::chrono::seconds watch_timeout{300};
  // Full re-list period even without errors (level-based safety net); 0 = never.
  std::chrono::seconds resync{0};
  // Wait after an error, doubling up to max_relist_backoff. Defaults 200 ms and 10 s.
  std::chrono::milliseconds relist_backoff{200};
  std::chrono::milliseconds max_relist_backoff{10000};
  // Applied on the informer's thread to every object a list or a watch event brings,
  // before it goes into the cache and to the handler (client-go's SetTransform): e.g.
  // to keep only the fields the caller reads, so that the cache holds no more. It must
  // keep metadata.name, metadata.namespace and metadata.resourceVersion (the cache's key
  // and what a re-list compares). An exception it throws fails that list, or ends that
  // watch before the event is applied; either way a re-list follows after the backoff.
  // Default: none (objects are cached whole).
  std::function<void(nlohmann::json* object)> transform;
  // Items per list request: a list is read in pages of this many (limit and continue),
  // so that no more than a page of whole objects is held at once; 0 = one request for
  // everything. Default 500 (client-go's reflector page size).
  int64_t page_size = 500;
  // Called on the informer's thread with the outcome of every list: OK once the list is
  // in the cache and its events have been handed to the handler; the client's error
  // (before the backoff) otherwise. Not called for a list that Stop cut short. An
  // exception it throws is dropped. Default: none.
  std::function<void(const Status& outcome)> on_list;
};

// Runs list (in pages of options.page_size), then watch from the list's resourceVersion; on 410 Gone (or any watch
// error, or a stream the server ends before its timeout) re-lists after a backoff
// (relist_backoff, doubling up to max_relist_backoff; reset by a watch that delivers
// events) and reports
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
  // True once a list has succeeded, and from then on (later errors keep the cache). While
  // synced, an object Get does not find does not exist (as far as the last list and the
  // watch tell); before, nothing is known yet.
  bool synced() const;
  // Cache reads (copies; thread-safe).
  std::optional<nlohmann::json> Get(const std::string& key) const;
  std::vector<nlohmann::json> List() const;
  // Number of lists done (1 after the first sync; more after 410s / errors / resyncs).
  int lists() const;

 private:
  using Events = std::vector<std::pair<std::string, nlohmann::json>>;
  void Run();
  // Lists into the cache (its resourceVersion in *rv) and reports the outcome (on_list).
  Status Relist(std::string* rv);
  // Reads every page of the list into *next (prepared, by key); its resourceVersion in *rv.
  Status ListInto(std::map<std::string, nlohmann::json>* next, std::string* rv);
  // Watches from *rv, applying each event to the cache (*rv follows them); *changed when
  // an event was applied. The client's Watch result.
  Status WatchFrom(const WatchOptions& options, std::string* rv, bool* changed);
  // The next watch's options; nullopt when a resync is due (`last_list`: when it was).
  std::optional<WatchOptions> NextWatch(const std::string& rv,
                                        std::chrono::steady_clock::time_point last_list) const;
  // apiVersion and kind filled in, then options_.transform applied.
  nlohmann::json Prepared(nlohmann::json object) const;
  void Notify(const std::string& type, const nlohmann::json& object);
  void ReportList(const Status& outcome);
  bool Sleep(std::chrono::milliseconds d);  // false when stopping
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
