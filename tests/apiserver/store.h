// The emulator's storage: objects in memory, one global resourceVersion counter, a
// bounded history of changes, and watchers fed synchronously from it. It knows the
// generic semantics of every kind (uid, creationTimestamp, generation, finalizers and
// deletionTimestamp, ownerReferences cascading delete); kind-specific rules (schemas,
// status subresources, patches) are the caller's (Api).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "star/kube/time.h"

#include "api_status.h"
#include "resources.h"
#include "selector.h"

namespace star::apiserver {

// Where a watch's events go: a chunked HTTP response in the server, a queue in tests.
// Called with the store's lock held: implementations must not block nor call the store.
class WatchSink {
 public:
  virtual ~WatchSink() = default;
  // Queues one line (a JSON event and '\n'). False once the client is gone or too far
  // behind; the store then drops the watcher.
  virtual bool Write(const std::string& line) = 0;
  // Ends the stream.
  virtual void Close() = 0;
};

struct WatchOptions {
  std::string ns;  // "" = every namespace
  LabelSelector labels;
  FieldSelector fields;
  // Stream the changes after this resourceVersion (410 Expired as an ERROR event when the
  // history no longer holds them). nullopt or 0: start with the current state as ADDED
  // events (unless send_initial_events is false).
  std::optional<std::uint64_t> resource_version;
  std::optional<bool> send_initial_events;  // true: end the initial state with a BOOKMARK
                                            // annotated k8s.io/initial-events-end
  bool bookmarks = false;                   // allowWatchBookmarks
  std::chrono::steady_clock::time_point deadline;  // the stream ends then (timeoutSeconds)
  std::optional<int> drop_after;            // fault injection: close after N events (0: at once)
  // What the client sees of a stored object (its apiVersion, or a Table).
  std::function<nlohmann::json(const nlohmann::json&)> present;
  std::string api_version, kind;  // of BOOKMARK objects
};

struct DeleteOptions {
  std::string propagation = "Background";  // Background | Foreground (as Background) | Orphan
  std::optional<std::string> precondition_uid, precondition_resource_version;
  bool dry_run = false;
};

class Store {
 public:
  struct Options {
    size_t history_limit = 10000;  // changes kept for watches from a resourceVersion
    std::chrono::milliseconds bookmark_interval{std::chrono::seconds(5)};
  };
  explicit Store(Options options);
  ~Store();

  // `object` must carry metadata.name or metadata.generateName and, for a namespaced kind,
  // metadata.namespace. Sets uid, creationTimestamp, resourceVersion and (kinds that track
  // it) generation 1. 201 with the stored object; 409 AlreadyExists.
  ApiResult Create(const ResourceType& type, nlohmann::json object, bool dry_run);

  ApiResult Get(const ResourceType& type, const std::string& ns, const std::string& name) const;

  struct ListResult {
    std::vector<nlohmann::json> items;  // by namespace, then name
    std::uint64_t resource_version = 0;
  };
  ListResult List(const ResourceType& type, const std::string& ns, const LabelSelector& labels,
                  const FieldSelector& fields) const;

  // Read-modify-write under the store's lock: `mutate` gets the current object and returns
  // the new one (or a failure, returned as is). The store then keeps name, namespace, uid,
  // creationTimestamp and deletionTimestamp; answers 409 Conflict if the new object's
  // metadata.resourceVersion is set and not the current one; bumps generation when
  // anything outside metadata (and status, for kinds with a status subresource) changed;
  // leaves a no-op update unrecorded; and removes an object being deleted once its
  // finalizers are gone. 404 if there is no such object.
  using Mutation = std::function<ApiResult(const nlohmann::json& current)>;
  ApiResult Update(const ResourceType& type, const std::string& ns, const std::string& name,
                   const Mutation& mutate, bool dry_run);

  // 200 with the removed object; 202 with the object when finalizers keep it (it gets a
  // deletionTimestamp). Removal deletes dependents (ownerReferences) unless Orphan.
  ApiResult Delete(const ResourceType& type, const std::string& ns, const std::string& name,
                   const DeleteOptions& options);

  // Removes every object of a kind (its CRD is gone) and ends its watches.
  void RemoveAll(const ResourceType& type);
  // Deletes every object in namespace `ns` (a Namespace was deleted).
  void DeleteNamespaceContents(const std::string& ns);

  // Starts a watch on `type`: writes the initial events to `sink`, then every matching
  // change until the deadline, Close or a failed write.
  void Watch(const ResourceType& type, WatchOptions options, std::shared_ptr<WatchSink> sink);

  // Sends due bookmarks, ends expired watches, forgets finished ones. Called periodically.
  void Tick(std::chrono::steady_clock::time_point now);
  // Ends every watch (shutdown).
  void CloseWatches();

  size_t active_watches() const;
  std::uint64_t resource_version() const;

 private:
  struct Event {
    std::uint64_t rv;
    std::string type;  // ADDED | MODIFIED | DELETED
    std::string group_resource;
    nlohmann::json object;
    nlohmann::json old;  // MODIFIED: the previous object
  };
  struct Watcher {
    std::string group_resource;
    WatchOptions options;
    std::shared_ptr<WatchSink> sink;
    int sent = 0;
    std::chrono::steady_clock::time_point last_bookmark;
    bool closed = false;
  };
  using Objects = std::map<std::string, nlohmann::json>;  // "namespace/name" -> object

  void EmitLocked(const char* type, const std::string& group_resource, const nlohmann::json& object,
                  const nlohmann::json& old);
  void DeliverLocked(Watcher& w, const Event& e);
  void SendLocked(Watcher& w, const std::string& type, const nlohmann::json& object, bool counts);
  void CloseLocked(Watcher& w);
  ApiResult DeleteLocked(const std::string& group_resource, const std::string& key,
                         const std::string& propagation);
  void CascadeLocked(const std::string& owner_uid, const std::string& propagation);
  void StoreLocked(const std::string& group_resource, const std::string& key, nlohmann::json object);

  const Options options_;
  mutable std::mutex mu_;
  std::map<std::string, Objects> objects_;  // by group_resource
  std::unordered_map<std::string, std::pair<std::string, std::string>> by_uid_;  // uid -> (gr, key)
  std::uint64_t rv_ = 0;
  std::deque<Event> history_;
  std::uint64_t compacted_through_ = 0;  // the last resourceVersion dropped from history_
  std::list<std::shared_ptr<Watcher>> watchers_;
};

// "namespace/name" ("/name" for cluster-scoped objects).
std::string ObjectKey(const std::string& ns, const std::string& name);
// metadata.<field> as a string ("" if absent).
std::string Meta(const nlohmann::json& object, const char* field);
// Now as RFC 3339 in UTC, to the second ("2025-01-31T12:00:00Z").
using kube::NowRfc3339;

}  // namespace star::apiserver
