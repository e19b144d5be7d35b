// NodeAllocationReconciler: one NodeAllocation per node, written by one work-queue key
// per node ("node:<name>"), so that the changes of many jobs to a node coalesce into
// one write. It folds what every job wants on the node (SetJobWants, from the
// TrainingJob reconciler) with the active reallocation plans' overrides (SetPlan),
// and keeps each plan's entries for the node in the object's annotation
// star.dev/reallocation-plans (reallocation.h), written in the same update;
// entries of other jobs and pods STAR does not manage stay. It also keeps the index of
// which nodes list which jobs (from the NodeAllocation informer and its own writes) and
// queues a job whose entries appear on or leave a node: entries of a job that is gone are
// then removed, and a finalizer waiting for them to leave goes on.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/node_allocation.h"
#include "star/operator/reconciler/controller.h"
#include "star/operator/reconciler/manager.h"
#include "star/operator/reconciler/reallocation.h"

namespace star::op {

class NodeAllocationReconciler : public Reconciler {
 public:
  // Adds its NodeAllocation handler to `manager`'s cache and registers itself for the
  // keys Owns accepts. `manager` must outlive it; call before the Manager starts.
  explicit NodeAllocationReconciler(Manager* manager);

  static bool Owns(const std::string& key);             // "node:<name>"
  static std::string KeyOf(const std::string& node);    // "node:<node>"

  // Records what job `job` ("<namespace>/<name>") wants on each node (its entries; a
  // node where the job has entries and that `by_node` does not name gets none: they are
  // removed) and queues the nodes whose wants changed. Thread-safe.
  void SetJobWants(const std::string& job, std::map<std::string, std::vector<api::PodAllocation>> by_node);
  // Records `job`'s reallocation plan (empty: none) and queues every node with a pod in
  // the old or the new plan. Thread-safe.
  void SetPlan(const std::string& job, const std::map<std::string, PodOverride>& plan);
  // Whether a NodeAllocation lists entries of `job` (as far as known). Thread-safe.
  bool Lists(const std::string& job) const;
  // Whether `job` has a plan in force here (SetPlan). Thread-safe.
  bool HasPlan(const std::string& job) const;
  // `job`'s plan as the cached NodeAllocations that list its pods keep it: each override
  // only when its pod is listed on that node and is a pod STAR created (IsStarPod, as the
  // pod cache has it). For a restarted operator. Thread-safe.
  std::map<std::string, PodOverride> StoredPlan(const std::string& job) const;

  // Writes the node's NodeAllocation when it differs from every job's wants with the
  // plans' overrides (compared with the cached object first; a 409 reads it again).
  StatusOr<std::chrono::milliseconds> Reconcile(const std::string& key) override;

 private:
  using Wants = std::map<std::string, std::vector<api::PodAllocation>>;  // job -> entries
  void OnAllocation(const std::string& type, const nlohmann::json& na);
  struct Desired {  // what Reconcile writes for one node
    Wants wants;
    JobPlans plans;                                // every active plan
    std::map<std::string, PodOverride> overrides;  // folded
  };
  api::NodeAllocationSpec Merge(const api::NodeAllocationSpec& current, const std::string& node,
                                const Desired& d) const;
  // The annotation value after this operator's plans replace its jobs' entries.
  std::string PlansAnnotation(const nlohmann::json& current, const std::string& node,
                              const api::NodeAllocationSpec& merged, const JobPlans& plans) const;
  bool InScope(const std::string& job) const;
  Status WriteOnce(const std::string& node, const Desired& d, bool from_cache);
  void Settle(const std::string& node, const Wants& written);

  Manager* manager_;
  std::string ns_;  // entries of other namespaces belong to the operator watching them
  mutable std::mutex mu_;  // guards the maps below
  // Which nodes' NodeAllocations list a job's pods (job -> nodes, node -> jobs).
  std::map<std::string, std::set<std::string>> job_nodes_, node_jobs_;
  // What each job wants on each node (node -> job -> entries, before overrides); an
  // empty list removes the job's entries.
  std::map<std::string, Wants> node_wants_;
  // Active plans (job -> overrides), folded into one override per pod.
  std::map<std::string, std::map<std::string, PodOverride>> plans_;
  std::map<std::string, PodOverride> folded_;
};

}  // namespace star::op
