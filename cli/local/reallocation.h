// Resource reallocation in `star local` (policy auto with
// spec.mitigation.resourceReallocation.enabled): acts on the control loop's request
// (op::ResourceNeeds, resource_needs.h) by the operator's rule, so that both runtimes
// make the same reallocation decisions from the same reports. The only co-located loads
// local mode knows are injected: a neighbor gives CPU, a bwneighbor its uplink's bandwidth.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "local/injector.h"
#include "local/run_event.h"
#include "local/sandbox.h"
#include "star/operator/resource_needs.h"

namespace star::local {

struct ReallocationContext {
  std::string job;               // the job's name
  int workers = 0;               // workers of the job
  int servers = 0;               // parameter servers (the first slots)
  int64_t worker_millicores = 0; // a worker slot's CPU capacity
  Sandbox* sandbox = nullptr;    // required: the neighbor caps go through its Host
  int peer_slot = -1;            // the bwneighbors' destination slot (InjectorOptions)
  // Records "reallocate", "reallocate_skipped" and "reallocate_undone" (worker: the one
  // that needs resources). Required.
  RunEventSink event;
  std::function<void(const std::string&)> notice;  // optional
};

// Acts on a job's resource request each time its revision changes (nothing otherwise),
// for every applied, not yet lifted neighbor or bwneighbor injection:
// * its worker is listed with the need it can meet (compute for a neighbor, communication
//   for a bwneighbor) and was not yet decided for it: plans with
//   resources::PlanReallocation (core), taking CPU or bandwidth from the neighbor for the
//   worker, never below the neighbor's declared guarantee (nor 100 millicores or 1 Mbit/s);
//   when the worker-seconds the job loses waiting on the worker (n workers x horizon x
//   (1 - 1/slowdown)) exceed the neighbor's imposed slowdown, caps the neighbor there
//   (its cgroup's CPU quota, or its class on the worker's uplink: "reallocate"), else
//   records "reallocate_skipped";
// * its worker is no longer listed with that need and the neighbor is capped: gives the
//   neighbor back what it held when injected ("reallocate_undone").
// Lifting an injection removes its cap (Injector). Failed plans or writes are noticed,
// not returned; a failed undo is tried again at the next revision. Not thread-safe.
class Reallocator {
 public:
  explicit Reallocator(ReallocationContext ctx) : ctx_(std::move(ctx)) {}

  // `injections` is the Injector's list (the same one at every call); `t` the run time
  // of the events. Returns the listed workers nothing was given to (no neighbor that
  // meets their need, or a plan not worth it), ascending, for the loop's NoteUnmetNeeds;
  // empty when `needs` was already acted on.
  std::vector<int> Update(const op::ResourceNeeds& needs, double t,
                          const std::vector<ActiveInjection>& injections);

  // The revision last acted on (0 before any).
  int64_t revision() const { return revision_; }

 private:
  struct NeighborState {
    std::optional<op::ResourceNeed> decided;  // the need last planned for
    int64_t capped = -1;  // the cap written (millicores or bits per second); -1 when none
  };
  void UpdateOne(const std::optional<op::ResourceNeed>& need, double t,
                 const ActiveInjection& a, NeighborState& state);
  void Undo(double t, const ActiveInjection& a, NeighborState& state);

  ReallocationContext ctx_;
  int64_t revision_ = 0;
  std::map<size_t, NeighborState> neighbors_;  // by index in the injections
};

}  // namespace star::local
