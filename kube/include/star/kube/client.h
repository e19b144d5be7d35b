// A Kubernetes API client (cpprestsdk + nlohmann/json): the operator's and the node
// agent's only way to the API server.
//
// Objects are nlohmann::json in their wire form. Resources are named by ResourceRef
// ({group, version, plural resource, namespaced}); well-known ones are below.
//
// Errors (every method): the server's Status is turned into a star::Status whose message
// is the server's message:
//   404 NotFound -> NotFound;  409 AlreadyExists (create) -> AlreadyExists;
//   409 Conflict (stale resourceVersion) -> Aborted;  410 Gone -> OutOfRange;
//   400/422 -> InvalidArgument;  401/403 -> FailedPrecondition (a 401 first makes the
//   client read its token file again or re-run its exec plugin, and try once more);
//   429 and 5xx -> retried inside with exponential backoff (honouring Retry-After) up to
//   ClientOptions::max_retries, then Unavailable;  connection failures -> Unavailable
//   (retried the same way);  no answer within the request timeout -> DeadlineExceeded;
//   a server certificate that does not verify (wrong CA, wrong host name) -> Unavailable,
//   not retried, naming the CA used;  credentials that cannot be had (a token file that
//   cannot be read, an exec plugin that fails) -> their own error, naming the source.
// Thread-safe: one Client is shared by every thread of a process.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "star/core/status.h"
#include "star/kube/client_options.h"

namespace star::kube {

struct ResourceRef {
  std::string group;     // "" for the core group
  std::string version;   // "v1", "v1alpha1"
  std::string resource;  // plural: "pods", "trainingjobs"
  bool namespaced = true;
  std::string kind;      // "Pod", "TrainingJob" (for messages and object construction)
};

// Well-known resources.
ResourceRef Pods();              // core/v1 pods
ResourceRef Services();          // core/v1 services
ResourceRef Events();            // core/v1 events
ResourceRef Leases();            // coordination.k8s.io/v1 leases
ResourceRef TrainingJobs();      // star.dev/v1alpha1 trainingjobs (namespaced)
ResourceRef NodeAllocations();   // star.dev/v1alpha1 nodeallocations (cluster-scoped)

struct WatchEvent {
  std::string type;     // "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
  nlohmann::json object;
};

struct ListOptions {
  std::string label_selector;  // "" = all
  std::string field_selector;  // "" = all
  // At most this many items (the server may send fewer); 0 = all. With a limit, the
  // List object's metadata.continue, when not empty, asks for the next page.
  int64_t limit = 0;
  // metadata.continue of the previous page; "" = the first page. A token the server no
  // longer has answers 410 Gone (OutOfRange): list again from the first page.
  std::string continue_token = "";
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // events after this version ("" = from now)
  bool allow_bookmarks = true;
  std::chrono::seconds timeout{300};  // server-side timeoutSeconds
};

class Client {
 public:
  static StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const ClientOptions& options() const;

  // ns is ignored for cluster-scoped resources; "" = options().default_namespace.
  StatusOr<nlohmann::json> Get(const ResourceRef& r, const std::string& ns, const std::string& name);
  // The List object: {"items": [...], "metadata": {"resourceVersion": ..., "continue":
  // ... (more pages, with options.limit)}}. ns "" with a namespaced resource = all
  // namespaces.
  StatusOr<nlohmann::json> List(const ResourceRef& r, const std::string& ns,
                                const ListOptions& options = {});
  StatusOr<nlohmann::json> Create(const ResourceRef& r, const std::string& ns,
                                  const nlohmann::json& object);
  // PUT; Aborted on a stale metadata.resourceVersion.
  StatusOr<nlohmann::json> Update(const ResourceRef& r, const std::string& ns,
                                  const nlohmann::json& object);
  // PUT .../status.
  StatusOr<nlohmann::json> UpdateStatus(const ResourceRef& r, const std::string& ns,
                                        const nlohmann::json& object);
  // application/merge-patch+json; `status` = the /status subresource.
  StatusOr<nlohmann::json> MergePatch(const ResourceRef& r, const std::string& ns,
                                      const std::string& name, const nlohmann::json& patch,
                                      bool status = false);
  // propagationPolicy Background. NotFound when already gone.
  Status Delete(const ResourceRef& r, const std::string& ns, const std::string& name);

  // Streams events until the handler returns false, `stop` becomes true, the server
  // ends the stream (timeout), or an error. Returns OK in the first three cases (the
  // caller re-watches from the last resourceVersion it saw), OutOfRange for 410 Gone
  // (as an HTTP status or an ERROR event: the caller must re-list), and the mapped
  // error otherwise. BOOKMARK events are passed to the handler (their object carries
  // only metadata.resourceVersion). Blocks the calling thread; the handler runs on it as
  // each event arrives. `stop` is looked at every 100 ms (also while connecting and during
  // retry backoffs), so setting it ends the call within about that. ns "" with a
  // namespaced resource = all namespaces (as List).
  Status Watch(const ResourceRef& r, const std::string& ns, const WatchOptions& options,
               const std::function<bool(const WatchEvent&)>& handler,
               const std::atomic<bool>* stop = nullptr);

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Retries `update` (a read-modify-write that returns Aborted on a conflict) up to
// `attempts` times; returns the first non-Aborted result.
Status RetryOnConflict(const std::function<Status()>& update, int attempts = 5);

}  // namespace star::kube
