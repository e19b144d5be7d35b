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
// Where a plan lives. A plan lowers pods of other jobs, possibly of other namespaces, so
// it is kept where only the operator writes and no job's owner reads: in the
// NodeAllocations it changes (cluster-scoped, written by the operator, read by the node
// agent), as the annotation star.dev/reallocation-plans on each node's object:
//   {"<requesting job ns/name>": {"<pod uid>": {"job": "<pod's job>", "cpu": m, "bps": b}}}
// with the entries of the pods on that node. The annotation and the allocations it
// produces are written in the same update, so they cannot disagree; a restarted operator
// reads each job's plan back from the NodeAllocations that list the job's pods
// (NodeAllocationReconciler::StoredPlan) and rebuilds the same allocations. Removing a
// job's plan (no worker needs resources any more, the job stopped running, or was
// deleted) restores everybody's baseline (Undo). Nothing about a plan is written to the
// TrainingJob, its Events or its namespace but the requesting job's own totals, and
// nothing a job's owner writes (its annotations included) is read as a plan.
// An override is applied only to a pod STAR created (controller ownerReference to a
// TrainingJob, star.dev/job label) that its job wants on the override's node: an override
// naming any other pod, or another node, is dropped.
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

// On a NodeAllocation: the plans that change its pods (see above).
inline constexpr char kReallocationPlansAnnotation[] = "star.dev/reallocation-plans";

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

// Plans by requesting job key: job -> pod uid -> override.
using JobPlans = std::map<std::string, std::map<std::string, PodOverride>>;

// kReallocationPlansAnnotation's value for node `node`: the overrides of `plans` on that
// node whose pod is in `pods` (uids of the node's entries); "" when none is left.
std::string PlansToAnnotation(const JobPlans& plans, const std::string& node, const std::set<std::string>& pods);
// Reads the annotation of NodeAllocation `node` (each override's node is `node`).
// InvalidArgument naming the field for a malformed value.
StatusOr<JobPlans> PlansFromAnnotation(const std::string& value, const std::string& node);

// Active plans of every job (job key -> its overrides) folded into one override per
// pod: a pod's own job's plan wins (it was granted), else the lowest CPU (and bandwidth)
// any plan gave it.
std::map<std::string, PodOverride> FoldOverrides(
    const std::map<std::string, std::map<std::string, PodOverride>>& plans);

// `pods` (the entries STAR's own pods want on node `node`) with `overrides` applied by
// uid; an override for another node is not applied.
std::vector<api::PodAllocation> ApplyOverrides(std::vector<api::PodAllocation> pods,
                                               const std::map<std::string, PodOverride>& overrides,
                                               const std::string& node);

}  // namespace star::op
