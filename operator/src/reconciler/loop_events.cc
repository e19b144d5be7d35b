#include "reconciler/loop_events.h"

namespace star::op {

EventSpec EventOfLoopEvent(const TimelineEvent& e) {
  const std::string w = "worker " + std::to_string(e.worker);
  if (e.event == "straggler") return {"Warning", "StragglerDetected", w + ": " + e.detail};
  if (e.event == "recovered") return {"Normal", "StragglerRecovered", w + " recovered"};
  if (e.event == "mode") return {"Normal", "SyncModeChanged", "mode " + e.detail};
  if (e.event == "amp_on") return {"Normal", "AmpEnabled", w + ": mixed precision on"};
  if (e.event == "amp_off") return {"Normal", "AmpDisabled", w + ": mixed precision off"};
  if (e.event == "batches") return {"Normal", "BatchesRebalanced", "local batches " + e.detail};
  return {"Normal", e.event, e.detail};
}

bool CallsForReallocation(const TimelineEvent& e) { return e.event == "mode" || e.event == "straggler"; }

void TrackStragglers(const TimelineEvent& e, std::map<int, std::pair<std::string, std::string>>* straggling,
                     const std::function<std::string()>& now) {
  if (e.event == "straggler") {
    auto& entry = (*straggling)[e.worker];
    if (entry.second.empty()) entry.second = now();
    entry.first = e.detail;
  } else if (e.event == "recovered") {
    straggling->erase(e.worker);
  }
}

ReallocationStep NextReallocationStep(bool enabled, api::JobPhase phase, const std::optional<JobSnapshot>& snapshot,
                                      bool has_plan, std::optional<int64_t> planned_epoch) {
  const bool keep = enabled && phase == api::JobPhase::kRunning && snapshot && snapshot->mode != api::SyncMode::kSsgd;
  if (has_plan && !keep) return ReallocationStep::kUndo;
  if (has_plan || !keep || snapshot->stragglers.empty()) return ReallocationStep::kNone;
  if (planned_epoch == snapshot->epoch) return ReallocationStep::kNone;
  return ReallocationStep::kPlan;
}

}  // namespace star::op
