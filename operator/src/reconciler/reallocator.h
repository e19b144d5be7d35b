// Reallocator: a TrainingJob's reallocation plan (reallocation.h), kept by the
// NodeAllocation reconciler in the NodeAllocations it changes. Follows the job's loop's resource needs
// (NextReallocationStep): plans for the workers they list each time they change, undoes
// when they become empty or the job stops running. The plan's overrides go to the
// NodeAllocation reconciler (SetPlan). Part of the TrainingJob reconciler.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reconciler/loop_events.h"
#include "star/core/api/training_job.h"
#include "star/core/status.h"
#include "star/operator/reconciler/event_recorder.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/operator/reconciler/job_registry.h"
#include "star/operator/reconciler/manager.h"
#include "star/operator/reconciler/metrics.h"
#include "star/operator/reconciler/node_allocation_reconciler.h"
#include "star/operator/reconciler/reallocation.h"

namespace star::op {

class Reallocator {
 public:
  // Every pointer must outlive it.
  Reallocator(Manager* manager, JobRegistry* registry, EventRecorder* events, NodeAllocationReconciler* nodes)
      : manager_(manager), registry_(registry), events_(events), nodes_(nodes) {}

  // A job's plan as the NodeAllocations keep it (NodeAllocationReconciler::StoredPlan);
  // none while the job is being deleted. For a job this operator has not seen yet.
  static std::map<std::string, PodOverride> StoredPlanOf(const nlohmann::json& job,
                                                         const NodeAllocationReconciler& nodes);

  // Plans, undoes or leaves the plan of job `key`. `observed`: the job's own pods by name.
  // A plan the planner refuses is an Event, not an error. Thread-safe.
  [[nodiscard]] Status Reallocate(nlohmann::json* job, const std::string& key, const api::TrainingJobSpec& spec,
                                  const PhaseDecision& d, const std::map<std::string, nlohmann::json>& observed);
  void Forget(const std::string& key);  // a job that is gone

  // star_job_cpu_allocation of a plan: the CPU `overrides` give each pod, named
  // "<namespace>/<name>" from the NodeAllocations in `in` (by uid; else the uid).
  static std::vector<PlannedPod> PlannedPodsOf(const ReallocationInput& in,
                                       const std::map<std::string, PodOverride>& overrides);

 private:
  Status Undo(const nlohmann::json& job, const std::string& key, const PhaseDecision& d);
  Status Plan(const nlohmann::json& job, const std::string& key, const JobSnapshot& snap,
              const std::map<std::string, nlohmann::json>& observed);
  ReallocationInput InputFor(const std::string& key, const JobSnapshot& snap,
                             const std::map<std::string, nlohmann::json>& observed);
  void AddNode(const std::string& node, ReallocationInput* in);
  std::optional<int64_t> NodeCpu(const std::string& node);
  std::optional<NeedsRevision> Acted(const std::string& key) const;

  Manager* manager_;
  JobRegistry* registry_;
  EventRecorder* events_;
  NodeAllocationReconciler* nodes_;
  mutable std::mutex mu_;
  std::map<std::string, NeedsRevision> acted_;  // the request each job's plan last followed
};

}  // namespace star::op
