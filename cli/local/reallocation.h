// Resource reallocation in `star local` (policy auto with
// spec.mitigation.resourceReallocation.enabled): takes CPU from an injected neighbor for
// a worker the control loop flags as a compute straggler, as resources::PlanReallocation
// (core) plans it; see runtime.h for the rule.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "local/injector.h"
#include "local/run_event.h"
#include "local/sandbox.h"

namespace star::local {

struct ReallocationContext {
  std::string job;               // the job's name
  int workers = 0;               // workers of the job
  int servers = 0;               // parameter servers (the first slots)
  int64_t worker_millicores = 0; // a worker slot's CPU capacity
  Sandbox* sandbox = nullptr;    // required: the neighbor caps go through its Host
  // Records "reallocate" and "reallocate_skipped" (worker: the straggler). Required.
  RunEventSink event;
  std::function<void(const std::string&)> notice;  // optional
};

// For each (worker, slowdown) in `compute_stragglers`, decides once per applied, not yet
// lifted neighbor injection of that worker whether to cap the neighbor's cgroup at the
// planned allocation (marking it reallocated either way), and writes the cap when the
// job's sync loss exceeds the neighbor's imposed slowdown. `t` is the run time of the
// events. Failures of the planner or the write are noticed, not returned.
void Reallocate(const ReallocationContext& ctx,
                const std::vector<std::pair<int, double>>& compute_stragglers, double t,
                std::vector<ActiveInjection>& injections);

}  // namespace star::local
