// Resource reallocation between co-located jobs (STAR, ALGORITHMS.md section 4).
//
// A job J that wants to leave SSGD (fixed-k, groups, ASGD) needs extra CPU and
// bandwidth for some of its pods. PlanReallocation decides, per node, where that comes
// from, as a pure function of a snapshot of the cluster:
//   0. capacity on the node that no pod is allocated;
//   1. idle resources of co-located SSGD jobs, at no cost: a worker w of such a job
//      idles a fraction (t_max - t_w) / t_max of every iteration waiting on its slowest
//      peer, so that fraction of its allocation can be removed without slowing the job;
//   2. only if that is not enough, resources taken from the other co-located jobs in
//      proportion to their weight (1/S_j) / (1 + progress_penalty * progress_j)
//      (less sensitive jobs give more; jobs further along are spared), never below a
//      pod's floor (its request if guaranteed; always at least the options' minimum);
//   3. the switch is recommended only if every demand is met and the time J loses by
//      staying synchronous exceeds the slowdown imposed on the others.
// CPU and bandwidth are planned independently with the same rules. Undo() restores
// the allocations from before the plan (when J returns to SSGD or ends).
//
// Units: CPU in millicores, bandwidth in bits per second (one number per pod, applied
// to both egress and ingress limits). Everything is integral and deterministic: ties
// and rounding leftovers go to pods in input order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "star/core/api/node_allocation.h"
#include "star/core/status.h"

namespace star::resources {

struct Resources {
  int64_t cpu_millicores = 0;
  int64_t bandwidth_bps = 0;
  friend bool operator==(const Resources&, const Resources&) = default;
};

struct Node {
  std::string name;   // unique, non-empty
  Resources capacity;  // allocatable on the node, >= 0
};

struct Job {
  std::string name;  // unique, non-empty ("<namespace>/<name>")
  // true: SSGD (every iteration waits for the slowest worker, so faster workers idle).
  bool synchronous = true;
  // t_max: the job's iteration time (its slowest worker's, excluding waiting), > 0.
  double iteration_seconds = 0;
  // S_j per resource: relative increase of the job's iteration time per relative
  // reduction of a pod's allocation (1 = proportional, e.g. compute-bound on CPU). > 0.
  double cpu_sensitivity = 1;
  double bandwidth_sensitivity = 1;
  double progress = 0;  // fraction of the training done, in [0, 1]
};

struct Pod {
  std::string namespace_;
  std::string name;
  std::string uid;   // unique, non-empty
  std::string node;  // must name a Node
  // Must name a Job, or be empty for a pod STAR does not manage (its allocation
  // counts against the node but is never changed).
  std::string job;
  Resources request;     // >= 0
  Resources allocation;  // current allocation, >= 0; >= request when guaranteed
  bool guaranteed = false;
  // t_w: this worker's iteration time excluding waiting on peers, >= 0. 0 (unknown)
  // or >= its job's t_max: the pod is not idle.
  double iteration_seconds = 0;
};

struct ClusterState {
  std::vector<Node> nodes;
  std::vector<Job> jobs;
  std::vector<Pod> pods;
};

struct Demand {
  std::string uid;  // a pod of the requesting job
  Resources extra;  // wanted on top of its current allocation, >= 0
};

struct ReallocationRequest {
  std::string job;              // J, must name a Job
  std::vector<Demand> demands;  // at most one per pod
  // Time J loses over `horizon_seconds` by staying synchronous, >= 0.
  double sync_loss_seconds = 0;
  // The period over which losses are compared, > 0 (e.g. until the next decision).
  double horizon_seconds = 0;
};

struct PlannerOptions {
  // No pod is ever throttled below these (nor below its request when guaranteed).
  // Defaults: 100 millicores (a tenth of a core) and 1 Mbit/s.
  Resources min_allocation{100, 1'000'000};
  // Taking weight of job j is (1/S_j) / (1 + progress_penalty * progress_j). Default 1:
  // a job at progress 1 gives half as much as an otherwise equal job at progress 0.
  double progress_penalty = 1.0;
};

// What happened to one pod. after = before - freed_idle - taken + granted.
struct PodChange {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string node;
  std::string job;
  bool guaranteed = false;
  Resources request;
  Resources before;
  Resources after;
  Resources freed_idle;  // removed at no cost (step 1)
  Resources taken;       // removed at a cost (step 2)
  Resources granted;     // given to the requesting job's pod
};

struct Plan {
  // The desired NodeAllocation of every node in ClusterState order (name = node name),
  // listing every pod on the node in input order.
  std::vector<api::NodeAllocation> allocations;
  std::vector<PodChange> pods;  // every pod, in input order

  Resources wanted;          // sum of the demands
  Resources from_free;       // step 0: unallocated node capacity used
  Resources freed_idle;      // step 1: removed at no cost
  Resources taken;           // step 2: removed from other jobs at a cost
  Resources granted;         // given to J (= from_free + freed_idle + taken)
  Resources shortfall;       // wanted - granted
  bool satisfied = false;    // every demand met in full

  // First-order estimate of the time the other jobs lose over the horizon:
  // sum_j horizon * sum_resources S_j * f_j, f_j = the largest fraction taken from
  // one of its pods (synchronous jobs wait for the slowest pod), or the mean fraction
  // over its pods (asynchronous jobs).
  double imposed_slowdown_seconds = 0;
  // satisfied && sync_loss_seconds > imposed_slowdown_seconds.
  bool switch_recommended = false;
  std::string reason;  // one line explaining switch_recommended
};

// OK, or InvalidArgument naming the field, e.g. "nodes[1].capacity.cpu_millicores:
// must be >= 0, got -5", "pods[3].node: unknown node \"n9\"", "pods[4].uid: duplicate
// \"abc\"", "nodes[0]: allocations exceed capacity (cpu 5000 > 4000)".
[[nodiscard]] Status Validate(const ClusterState& state);
[[nodiscard]] Status Validate(const ClusterState& state, const ReallocationRequest& request);
[[nodiscard]] Status Validate(const PlannerOptions& options);

// What pod `p` keeps whatever a plan does: the floor, or its request when guaranteed.
[[nodiscard]] Resources FloorOf(const Pod& p, const PlannerOptions& options);
// Whether a plan for `job` may take from `p`: a pod STAR manages, of another job.
[[nodiscard]] bool MayGive(const Pod& p, const std::string& job);

// Plans the reallocation (see the file comment). Errors: the Validate functions'.
// Complexity O(P log P) for P pods.
[[nodiscard]] StatusOr<Plan> PlanReallocation(const ClusterState& state,
                                              const ReallocationRequest& request,
                                              const PlannerOptions& options = {});

// The plan that puts every pod back to its allocation before `plan` (all amounts
// moved are reported with the opposite role: nothing freed or taken, granted = 0).
// With `drop_job` non-empty, that job's pods are left out (the job ended).
[[nodiscard]] Plan Undo(const Plan& plan, const std::string& drop_job = "");

// OK iff `plan` lists every pod of `state` exactly once, no guaranteed pod is below its
// request, no pod is below 0, and no node's allocations exceed its capacity; otherwise
// FailedPrecondition naming the pod or node.
[[nodiscard]] Status CheckGuarantees(const ClusterState& state, const Plan& plan);

// Kubernetes' mapping from CPU millicores to a cgroup v2 cpu.weight (1..10000), as the
// kubelet computes it (shares = millicores * 1024 / 1000, then shares -> weight).
[[nodiscard]] int64_t CpuWeight(int64_t millicores);

}  // namespace star::resources
