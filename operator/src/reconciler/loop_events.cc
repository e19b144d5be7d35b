#include "reconciler/loop_events.h"

#include <cmath>
#include <iomanip>
#include <sstream>

namespace star::op {

EventSpec EventOfLoopEvent(const TimelineEvent& e) {
  const std::string w = "worker " + std::to_string(e.worker);
  switch (e.kind) {
    case EventKind::kStraggler: return {"Warning", "StragglerDetected", w + ": " + EventDetail(e)};
    case EventKind::kRecovered: return {"Normal", "StragglerRecovered", w + " recovered"};
    case EventKind::kMode: return {"Normal", "SyncModeChanged", "mode " + EventDetail(e)};
    case EventKind::kAmpOn: return {"Normal", "AmpEnabled", w + ": mixed precision on"};
    case EventKind::kAmpOff: return {"Normal", "AmpDisabled", w + ": mixed precision off"};
    case EventKind::kBatches: return {"Normal", "BatchesRebalanced", "local batches " + EventDetail(e)};
    case EventKind::kTargetReached: {
      std::ostringstream os;
      os << std::fixed << std::setprecision(3) << "accuracy " << e.target.accuracy
         << " reached the target " << e.target.target << std::setprecision(1) << " at "
         << e.t << " s";
      return {"Normal", "TargetAccuracyReached", os.str()};
    }
    case EventKind::kSelectorFallback:
      return {"Warning", "LearnedSelectorUnavailable",
              "selector ML: the learned selector is unavailable (" + e.reason +
                  "); the heuristic selects the mode"};
    case EventKind::kSchedule: return {"Normal", "PipelineScheduleChanged", "pipeline " + EventDetail(e)};
  }
  return {"Normal", std::string(EventName(e.kind)), EventDetail(e)};
}

void TrackStragglers(const TimelineEvent& e, std::map<int, TrackedStraggler>* straggling,
                     const std::function<std::string()>& now) {
  switch (e.kind) {
    case EventKind::kStraggler: {
      TrackedStraggler& entry = (*straggling)[e.worker];
      if (entry.since.empty()) entry.since = now();
      entry.fields = e.straggler;
      return;
    }
    case EventKind::kRecovered: straggling->erase(e.worker); return;
    case EventKind::kMode:
    case EventKind::kAmpOn:
    case EventKind::kAmpOff:
    case EventKind::kBatches:
    case EventKind::kTargetReached:
    case EventKind::kSelectorFallback:
    case EventKind::kSchedule: return;
  }
}

api::StragglerStatus StragglerStatusOf(int worker, const TrackedStraggler& tracked) {
  api::StragglerStatus s;
  s.worker = worker;
  s.cause = tracked.fields.cause;
  s.kind = tracked.fields.kind;
  s.slowdown = std::round(tracked.fields.slowdown * 100) / 100;
  s.since = tracked.since;
  return s;
}

ReallocationStep NextReallocationStep(bool enabled, api::JobPhase phase, const std::optional<JobSnapshot>& snapshot,
                                      bool has_plan, std::optional<NeedsRevision> acted) {
  if (!enabled || phase != api::JobPhase::kRunning || !snapshot) {
    return has_plan ? ReallocationStep::kUndo : ReallocationStep::kNone;
  }
  const NeedsRevision now{snapshot->loop, snapshot->needs.revision};
  if (acted == now) return ReallocationStep::kNone;
  if (!snapshot->needs.workers.empty()) return ReallocationStep::kPlan;
  if (has_plan && now.revision > 0) return ReallocationStep::kUndo;
  return ReallocationStep::kNone;
}

}  // namespace star::op
