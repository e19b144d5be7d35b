// Resource reallocation on Kubernetes: what the operator does when a job's control loop
// asks for resources for some of its workers (resource_needs.h; ALGORITHMS.md section 4,
// resources::PlanReallocation).
//
// The pods of the workers that need resources ask for the CPU (compute stragglers) or bandwidth
// (communication stragglers) that would bring them back to speed: a pod slowed down s
// times wants (s - 1) x its current allocation on top. The cluster snapshot is built from
// the NodeAllocations of the nodes those pods run on (every STAR pod there, with its
// job's load as the job control loops see it) and the Nodes' allocatable CPU. The plan
// is applied only when the planner recommends it (every demand met, and the job loses
// more by staying synchronous than it imposes on the others).
//
// An applied plan is written, before anything acts on it, as the annotation
// star.dev/reallocation on the requesting TrainingJob: the pods whose allocation it
// changes, with their new CPU quota and bandwidth. NodeAllocations are then written
// level-based from the pods' own limits with every active plan's overrides on top, so
// a restarted operator rebuilds the same allocations, and removing the annotation (no
// worker needs resources any more, the job stopped running, or was deleted) restores
// everybody's baseline (Undo).
// Bandwidth is planned only for pods that already have a bandwidth allocation.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/node_allocation.h"
#include "star/core/api/training_job.h"
#include "star/core/resources/planner.h"
#include "star/core/status.h"

namespace star::op {

inline constexpr char kReallocationAnnotation[] = "star.dev/reallocation";

// How a job runs, as its control loop sees it.
struct JobLoad {
  bool synchronous = true;             // SSGD
  std::vector<double> worker_seconds;  // per rank, excluding waiting; 0 unknown
  double progress = 0;                 // in [0, 1]
};

struct StragglingPod {
  std::string uid;
  std::string node;
  int worker = 0;
  api::StragglerCause cause = api::StragglerCause::kCompute;
  double slowdown = 1;
};

// A STAR pod of some job: its job key ("ns/name") and rank (-1 for a parameter server).
struct PodOwner {
  std::string job;
  int rank = -1;
};

struct ReallocationInput {
  std::string job;   // the requesting job's key
  int workers = 0;   // its worker count
  std::vector<StragglingPod> stragglers;
  // Current NodeAllocations of (at least) the stragglers' nodes.
  std::vector<api::NodeAllocation> allocations;
  // Allocatable CPU (millicores) of each node; a node missing here, or whose pods'
  // allocations exceed it, is taken to be exactly full.
  std::map<std::string, int64_t> node_cpu;
  std::map<std::string, PodOwner> owners;  // pod uid -> owner; others are not STAR's
  std::map<std::string, JobLoad> loads;    // job key -> load; others count as idle-free SSGD
  double horizon_seconds = 60;             // > 0
  resources::PlannerOptions planner;
};

// The new allocation of one pod.
struct PodOverride {
  std::string node;
  std::string job;  // its job's key
  int64_t cpu_millicores = 0;
  int64_t bandwidth_bps = 0;  // 0 = unchanged
  friend bool operator==(const PodOverride&, const PodOverride&) = default;
};

struct ReallocationOutcome {
  bool apply = false;
  std::map<std::string, PodOverride> overrides;  // uid -> new allocation (changed pods)
  resources::Plan plan;
  std::string message;  // one line for the job's Event
};

// Plans the reallocation. InvalidArgument when there is nothing to ask for (no straggler
// with a node) or the snapshot is inconsistent (the planner's Validate message).
StatusOr<ReallocationOutcome> PlanJobReallocation(const ReallocationInput& in);

// The annotation's value: {"pods": {uid: {"node","job","cpu","bps"}}}.
std::string OverridesToAnnotation(const std::map<std::string, PodOverride>& overrides);
// InvalidArgument naming the field for a malformed value.
StatusOr<std::map<std::string, PodOverride>> OverridesFromAnnotation(const std::string& value);

// Active plans of every job (job key -> its overrides) folded into one override per
// pod: a pod's own job's plan wins (it was granted), else the lowest CPU (and bandwidth)
// any plan gave it.
std::map<std::string, PodOverride> FoldOverrides(
    const std::map<std::string, std::map<std::string, PodOverride>>& plans);

// `pods` with `overrides` applied (by uid).
std::vector<api::PodAllocation> ApplyOverrides(std::vector<api::PodAllocation> pods,
                                               const std::map<std::string, PodOverride>& overrides);

}  // namespace star::op
