// Cache: the operator's informers (controller-runtime's cache), one per kind it watches:
// TrainingJobs (in the watched namespace), the jobs' Pods and Services (labelled
// star.dev/job, same namespace) and NodeAllocations (cluster-scoped). Controllers add
// handlers before Start and read objects from it afterwards. Objects are cached (and
// handed to handlers) as TrimForCache leaves them.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/status.h"
#include "star/kube/client.h"
#include "star/kube/informer.h"

namespace star::op {

enum class Kind { kTrainingJob, kPod, kService, kNodeAllocation };

// What the cache keeps of an object of `kind` (its informer's transform), so that it holds
// no more than the operator reads. Every kind loses metadata.managedFields. Pods keep
// apiVersion, kind; metadata name, namespace, uid, resourceVersion, labels,
// deletionTimestamp, the controller ownerReference (apiVersion, kind, name, uid,
// controller) and the kPodTemplateHashAnnotation annotation; spec.nodeName and each
// container's name and resources; status phase and message. Services keep apiVersion,
// kind and metadata name, namespace, uid, resourceVersion, labels. TrainingJobs also
// lose the kubectl.kubernetes.io/last-applied-configuration annotation (a copy of the
// spec); NodeAllocations keep the rest (the operator writes them back whole: an update
// without managedFields leaves the server's as they are). A value that is not an object
// is left as it is.
void TrimForCache(Kind kind, nlohmann::json* object);

class Cache {
 public:
  // Called on the kind's informer thread with "ADDED" | "MODIFIED" | "DELETED".
  using Handler = std::function<void(const std::string& type, const nlohmann::json& object)>;

  // `client` must outlive the Cache. `ns`: the namespace of jobs, pods and services
  // ("" = all).
  Cache(kube::Client* client, std::string ns);
  ~Cache();  // Stop()
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  // Adds a handler of `kind`'s events; handlers run in the order added. Before Start.
  void AddHandler(Kind kind, Handler handler);
  // Starts the Pod, Service and NodeAllocation informers and waits for their first
  // list, then the TrainingJob informer (a job reconciled before its pods are cached
  // would create them again and misjudge its phase). Unavailable when a first list does
  // not come within `sync_timeout`. Call once.
  [[nodiscard]] Status Start(std::chrono::milliseconds sync_timeout);
  void Stop();  // idempotent

  // The cached object ("<namespace>/<name>", or the name of a cluster-scoped one);
  // nullopt when absent (or not listed yet). Thread-safe.
  std::optional<nlohmann::json> Get(Kind kind, const std::string& key) const;

 private:
  void Dispatch(Kind kind, const std::string& type, const nlohmann::json& object) const;
  std::unique_ptr<kube::Informer> MakeInformer(Kind kind);

  kube::Client* client_;
  std::string ns_;
  std::map<Kind, std::vector<Handler>> handlers_;
  std::map<Kind, std::unique_ptr<kube::Informer>> informers_;
};

}  // namespace star::op
