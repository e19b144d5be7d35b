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
// batches; others pass through with their own name as the reason).
EventSpec EventOfLoopEvent(const TimelineEvent& e);

// Whether a loop event may call for a reallocation plan or its undo (a new mode or a
// straggler): the job is reconciled again.
bool CallsForReallocation(const TimelineEvent& e);

// Follows stragglers through the loop's events for status: a straggler event records the
// worker's classification (when it started straggling: `now` at its first event); a
// recovery removes the worker.
void TrackStragglers(const TimelineEvent& e, std::map<int, TrackedStraggler>* straggling,
                     const std::function<std::string()>& now);

// The status entry of a straggling worker: its event's cause, kind and slowdown (rounded
// to 2 decimals, as the event's detail has it) and since; node is left to the caller.
api::StragglerStatus StragglerStatusOf(int worker, const TrackedStraggler& tracked);

enum class ReallocationStep { kNone, kUndo, kPlan };

// What to do about a job's reallocation plan. A plan is in force while reallocation is
// `enabled`, the job is Running and its loop left SSGD; an existing plan (`has_plan`)
// out of force is undone; a new one is made once per decision epoch (`planned_epoch`:
// the epoch last planned at) when there are stragglers.
ReallocationStep NextReallocationStep(bool enabled, api::JobPhase phase, const std::optional<JobSnapshot>& snapshot,
                                      bool has_plan, std::optional<int64_t> planned_epoch);

}  // namespace star::op
