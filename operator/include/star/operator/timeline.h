// The control loop's timeline: every change it made, typed, and rendered for the
// `star local` report and Kubernetes events (timeline[] of {t, event, worker, detail}).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "star/core/api/types.h"

namespace star::op {

// What changed. Names (EventName): "straggler", "recovered", "mode", "amp_on",
// "amp_off", "batches", "target_reached", "selector_fallback" (the job asked for the
// learned selector and got the heuristic; control_loop.h), "schedule" (a pipeline's
// warm-up depths).
enum class EventKind {
  kStraggler,
  kRecovered,
  kMode,
  kAmpOn,
  kAmpOff,
  kBatches,
  kTargetReached,
  kSelectorFallback,
  kSchedule
};
[[nodiscard]] std::string_view EventName(EventKind kind);

// kStraggler: the detector's classification (a new one for an already-straggling
// worker is a reclassification). slowdown is the detector's, not rounded.
struct StragglerFields {
  api::StragglerCause cause = api::StragglerCause::kCompute;
  api::StragglerKind kind = api::StragglerKind::kDynamic;
  double slowdown = 1;

  friend bool operator==(const StragglerFields&, const StragglerFields&) = default;
};

// kMode: the new synchronisation mode.
struct ModeFields {
  api::SyncMode mode = api::SyncMode::kSsgd;
  int k = 0;
  std::vector<std::vector<int>> groups{};  // fixed_k: [ranks fastest first]; groups

  friend bool operator==(const ModeFields&, const ModeFields&) = default;
};

// kSchedule: a pipeline's new warm-up depths (empty: back to its static schedule), the
// model's iteration time under them and under plain 1F1B, and the link (i joins stage i
// and i + 1) the model found slowest beyond the fastest (-1: none).
struct ScheduleFields {
  std::vector<int> warmup{};
  double predicted_seconds = 0;
  double static_seconds = 0;
  int slow_link = -1;
  // A failed trial (control_loop.h): the iteration measured under the depths it ends
  // and under the static schedule before them; 0 otherwise.
  double measured_seconds = 0;
  double measured_static_seconds = 0;

  friend bool operator==(const ScheduleFields&, const ScheduleFields&) = default;
};

// kTargetReached: the accuracy that reached the target, and the target.
struct TargetFields {
  double accuracy = 0;
  double target = 0;

  friend bool operator==(const TargetFields&, const TargetFields&) = default;
};

// One change, at the time_seconds of the report that caused it (kTargetReached: at the
// time the accuracy was measured). worker is -1 for job-wide events (mode, batches,
// target_reached, selector_fallback). Only the fields of `kind` are meaningful; the report
// strings are EventName(kind) and EventDetail(event).
struct TimelineEvent {
  double t = 0;
  int worker = -1;
  EventKind kind = EventKind::kStraggler;
  StragglerFields straggler{};     // kStraggler
  ModeFields mode{};               // kMode
  std::vector<int64_t> batches{};  // kBatches: per worker, by rank
  TargetFields target{};           // kTargetReached
  std::string reason{};            // kSelectorFallback: why the learned selector is not used
  ScheduleFields schedule{};       // kSchedule

  friend bool operator==(const TimelineEvent&, const TimelineEvent&) = default;
};

// The report's detail string, exactly as the report contract has it:
//   straggler  "cause=compute kind=static slowdown=2.01" (slowdown rounded to 2 decimals)
//   mode       "ssgd k=4", "fixed_k k=3 [[0,1,3,2]]", "groups k=4 [[0,1],[2]]"
//   batches    "[32,32,16,48]"
//   target_reached  "accuracy >= 0.800" (the target, 3 decimals)
//   selector_fallback  the reason, e.g. "cannot open /usr/share/star/selector.json"
//   schedule   "warmup=[8,8,2,1] predicted=0.295s static=0.337s slow_link=stage1-stage2"
//              ("warmup=static ..." back to the static schedule; no slow_link when none;
//              after a failed trial " measured=0.281s measured_static=0.275s")
//   others     ""
[[nodiscard]] std::string EventDetail(const TimelineEvent& event);

[[nodiscard]] TimelineEvent MakeStragglerEvent(double t, int worker, StragglerFields fields);
[[nodiscard]] TimelineEvent MakeRecoveredEvent(double t, int worker);
[[nodiscard]] TimelineEvent MakeModeEvent(double t, ModeFields fields);
[[nodiscard]] TimelineEvent MakeAmpEvent(double t, int worker, bool on);
[[nodiscard]] TimelineEvent MakeBatchesEvent(double t, std::vector<int64_t> batches);
[[nodiscard]] TimelineEvent MakeTargetReachedEvent(double t, TargetFields fields);
[[nodiscard]] TimelineEvent MakeSelectorFallbackEvent(double t, std::string reason);
[[nodiscard]] TimelineEvent MakeScheduleEvent(double t, ScheduleFields fields);

}  // namespace star::op
