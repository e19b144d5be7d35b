// The control loop's reallocation request: which workers need more resources (CPU for
// compute stragglers, bandwidth for communication stragglers) and when that need ends.
// The loop decides who needs; a runtime decides who gives and how much (the operator
// and `star local` plan with resources::PlanReallocation) and acts the same way on it.
//
// The rule (evaluated at every round close; see control_loop.h for rounds):
// * A worker enters the request when the detector flags it, with the detector's cause
//   and slowdown at that round, or when it runs AMP and is still contended (AMP hides
//   the contention it offsets: its full-precision equivalent compute per sample is still
//   over `amp_release_slowdown` x the typical worker's), as a compute need whose slowdown
//   is that ratio.
// * While it stays in, its entry changes only when the detector flags it with another
//   cause (slowdown updates alone do not change the request: no re-planning on noise).
// * It leaves after `resource_release_rounds` consecutive round closes in which it was
//   neither flagged nor still contended under AMP (hysteresis: it does not flap).
// * A communication need is held at least 4 x `resource_release_rounds`: the bandwidth a
//   worker was given leaves its link as fast as the others' (nothing shows it still
//   needs it), and finding the link slow again costs a detection.
// * A worker that enters again after leaving held what it was given only thanks to it
//   (its contention outlasted the hold): each return doubles its hold, up to 16 x
//   `resource_release_rounds`, so a persistent neighbor is given up ever more rarely.
// * With spec.mitigation.resourceReallocation.enabled = false the request stays empty.
// An empty request means: give everything back.
#pragma once

#include <cstdint>
#include <vector>

#include "star/core/api/types.h"

namespace star::op {

// One worker that needs resources. (Not resources::ReallocationRequest, which is the
// planner's input: one job's demands in millicores and bits per second.)
struct ResourceNeed {
  int worker = 0;
  api::StragglerCause cause = api::StragglerCause::kCompute;
  double slowdown = 1;  // its time / the typical worker's, when it entered or changed cause

  friend bool operator==(const ResourceNeed&, const ResourceNeed&) = default;
};

struct ResourceNeeds {
  std::vector<ResourceNeed> workers;  // ascending by worker; empty = give everything back
  // Starts at 0 and goes up by one each time `workers` changes: a runtime re-plans when
  // it differs from the revision it last acted on.
  int64_t revision = 0;

  friend bool operator==(const ResourceNeeds&, const ResourceNeeds&) = default;
};

}  // namespace star::op
