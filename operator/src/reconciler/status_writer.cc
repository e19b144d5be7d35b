#include "star/operator/reconciler/status_writer.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "reconciler/loop_events.h"

namespace star::op {
namespace {

// A decision's change: its star_job_decisions_total kind and its place among the events
// of one decision (JobControlLoop::RecordChanges: mode, then AMP per worker, then
// batches, then a pipeline's schedule); nullopt for other events.
struct Change {
  const char* kind;
  int order;
};
std::optional<Change> ChangeOf(EventKind kind) {
  switch (kind) {
    case EventKind::kMode: return Change{"sync_mode", 0};
    case EventKind::kAmpOn:
    case EventKind::kAmpOff: return Change{"amp", 1};
    case EventKind::kBatches: return Change{"batch", 2};
    case EventKind::kSchedule: return Change{"schedule", 3};
    case EventKind::kStraggler:
    case EventKind::kRecovered:
    case EventKind::kTargetReached:
    case EventKind::kSelectorFallback: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::set<std::string>> DecisionKinds(const std::vector<TimelineEvent>& events) {
  std::vector<std::set<std::string>> out;
  std::optional<Change> previous;  // the previous event's, when it was a decision's change
  double previous_t = 0;
  for (const TimelineEvent& e : events) {
    const std::optional<Change> change = ChangeOf(e.kind);
    const bool same = change && previous && previous_t == e.t &&
                      (previous->order < change->order || (previous->order == 1 && change->order == 1));
    if (change && !same) out.emplace_back();
    if (change) out.back().insert(change->kind);
    previous = change;
    previous_t = e.t;
  }
  return out;
}

void RecordJobMetrics(OperatorMetrics* metrics, const JobUpdate& u) {
  metrics->JobState(u.key, u.mode, u.stragglers);
  // u.status is a merge patch: its nulls remove fields (status.pipeline back to static).
  nlohmann::json patched = nlohmann::json::object();
  patched.merge_patch(u.status);
  auto status = api::TrainingJobStatusFromJson(patched, "status");
  metrics->WorkerStragglers(u.key, status.ok() ? status->stragglers : std::vector<api::StragglerStatus>{});
  metrics->EstimatedTta(u.key, u.estimated_tta_seconds);
  metrics->Accuracy(u.key, u.accuracy);
  for (const std::set<std::string>& kinds : DecisionKinds(u.events)) metrics->Decisions(u.key, kinds);
}

Status StatusWriter::Start() {
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void StatusWriter::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void StatusWriter::Nudge() {
  std::lock_guard lock(mu_);
  nudged_ = true;
  cv_.notify_all();
}

void StatusWriter::Run() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock lock(mu_);
  Clock::time_point last = Clock::now();
  while (!stopping_) {
    cv_.wait_until(lock, last + interval_, [&] { return stopping_ || nudged_; });
    if (nudged_) cv_.wait_until(lock, last + kNudgeGap, [&] { return stopping_; });
    if (stopping_) break;
    nudged_ = false;
    lock.unlock();
    WriteOnce();
    lock.lock();
    last = Clock::now();
  }
}

void StatusWriter::WriteOnce() {
  for (JobUpdate& u : registry_->Drain()) {
    RecordJobMetrics(manager_->metrics(), u);
    auto job = manager_->cache().Get(Kind::kTrainingJob, u.key);
    if (!job) continue;
    const std::string key = u.key;
    const std::vector<TimelineEvent> events = u.events;
    const bool needs_changed = u.needs_changed;
    records_->WriteReported(std::move(u));
    for (const TimelineEvent& e : events) events_->Emit(*job, EventOfLoopEvent(e));
    if (needs_changed) manager_->Enqueue(key);  // its reallocation plan is due
  }
}

}  // namespace star::op
