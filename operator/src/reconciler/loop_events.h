// Where the operator reads the job control loop's events and decides when to
// reallocate: one small function each, so that a change of the loop's event type or of
// who asks for a reallocation touches only this file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "star/core/api/types.h"
#include "star/operator/control_loop.h"
#include "star/operator/reconciler/event_recorder.h"
#include "star/operator/reconciler/job_registry.h"

namespace star::op {

// The Kubernetes Event for a loop event (straggler, recovered, mode, amp_on, amp_off,
// batches, target_reached; selector_fallback is the Warning LearnedSelectorUnavailable).
EventSpec EventOfLoopEvent(const TimelineEvent& e);

// Follows stragglers through the loop's events for status: a straggler event records the
// worker's classification (when it started straggling: `now` at its first event); a
// recovery removes the worker.
void TrackStragglers(const TimelineEvent& e, std::map<int, TrackedStraggler>* straggling,
                     const std::function<std::string()>& now);

// The status entry of a straggling worker: its event's cause, kind and slowdown (rounded
// to 2 decimals, as the event's detail has it) and since; node is left to the caller.
api::StragglerStatus StragglerStatusOf(int worker, const TrackedStraggler& tracked);

// One request of a job's loop: the loop (JobSnapshot::loop) and its needs' revision.
struct NeedsRevision {
  int64_t loop = 0;
  int64_t revision = 0;
  friend bool operator==(const NeedsRevision&, const NeedsRevision&) = default;
};

enum class ReallocationStep { kNone, kUndo, kPlan };

// What to do about a job's reallocation plan, driven by its loop's resource needs
// (resource_needs.h), as `star local` does:
// * reallocation disabled, the job not Running, or unknown to the registry (`snapshot`
//   nullopt): an existing plan (`has_plan`) is undone;
// * otherwise nothing while the request is the one last acted on (`acted`);
// * a new request that lists workers: plan (again) for exactly those workers;
// * a request that became empty (revision > 0): an existing plan is undone. At revision 0
//   the loop has asked nothing yet (it was just made: a restarted operator, a changed
//   spec), so a plan made before it stays until its request changes.
ReallocationStep NextReallocationStep(bool enabled, api::JobPhase phase, const std::optional<JobSnapshot>& snapshot,
                                      bool has_plan, std::optional<NeedsRevision> acted);

}  // namespace star::op
