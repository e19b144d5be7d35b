#include "star/operator/timeline.h"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <utility>

namespace star::op {
namespace {

std::string GroupsString(const std::vector<std::vector<int>>& groups) {
  std::ostringstream os;
  os << '[';
  for (size_t g = 0; g < groups.size(); ++g) {
    os << (g ? ",[" : "[");
    for (size_t i = 0; i < groups[g].size(); ++i) os << (i ? "," : "") << groups[g][i];
    os << ']';
  }
  os << ']';
  return os.str();
}

std::string BatchesString(const std::vector<int64_t>& b) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < b.size(); ++i) os << (i ? "," : "") << b[i];
  os << ']';
  return os.str();
}

std::string StragglerDetail(const StragglerFields& s) {
  std::ostringstream os;
  os << "cause=" << api::ToString(s.cause) << " kind=" << api::ToString(s.kind)
     << " slowdown=" << std::round(s.slowdown * 100) / 100;
  return os.str();
}

std::string ModeDetail(const ModeFields& m) {
  std::ostringstream os;
  os << api::ToString(m.mode) << " k=" << m.k;
  if (m.mode == api::SyncMode::kGroups || m.mode == api::SyncMode::kFixedK) {
    os << ' ' << GroupsString(m.groups);
  }
  return os.str();
}

std::string TargetDetail(const TargetFields& f) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(3) << "accuracy >= " << f.target;
  return os.str();
}

std::string ScheduleDetail(const ScheduleFields& f) {
  std::ostringstream os;
  os << "warmup=";
  if (f.warmup.empty()) os << "static";
  for (size_t i = 0; i < f.warmup.size(); ++i) os << (i ? "," : "[") << f.warmup[i];
  if (!f.warmup.empty()) os << ']';
  os << std::fixed << std::setprecision(3) << " predicted=" << f.predicted_seconds << "s static=" << f.static_seconds
     << 's';
  if (f.slow_link >= 0) os << " slow_link=stage" << f.slow_link << "-stage" << f.slow_link + 1;
  if (f.measured_seconds > 0) {
    os << " measured=" << f.measured_seconds << "s measured_static=" << f.measured_static_seconds << 's';
  }
  return os.str();
}

}  // namespace

std::string_view EventName(EventKind kind) {
  switch (kind) {
    case EventKind::kStraggler: return "straggler";
    case EventKind::kRecovered: return "recovered";
    case EventKind::kMode: return "mode";
    case EventKind::kAmpOn: return "amp_on";
    case EventKind::kAmpOff: return "amp_off";
    case EventKind::kBatches: return "batches";
    case EventKind::kTargetReached: return "target_reached";
    case EventKind::kSelectorFallback: return "selector_fallback";
    case EventKind::kSchedule: return "schedule";
  }
  return "unknown";
}

std::string EventDetail(const TimelineEvent& e) {
  switch (e.kind) {
    case EventKind::kStraggler: return StragglerDetail(e.straggler);
    case EventKind::kMode: return ModeDetail(e.mode);
    case EventKind::kBatches: return BatchesString(e.batches);
    case EventKind::kTargetReached: return TargetDetail(e.target);
    case EventKind::kSelectorFallback: return e.reason;
    case EventKind::kSchedule: return ScheduleDetail(e.schedule);
    case EventKind::kRecovered:
    case EventKind::kAmpOn:
    case EventKind::kAmpOff: return "";
  }
  return "";
}

TimelineEvent MakeStragglerEvent(double t, int worker, StragglerFields fields) {
  TimelineEvent e{.t = t, .worker = worker, .kind = EventKind::kStraggler};
  e.straggler = fields;
  return e;
}

TimelineEvent MakeRecoveredEvent(double t, int worker) {
  return {.t = t, .worker = worker, .kind = EventKind::kRecovered};
}

TimelineEvent MakeModeEvent(double t, ModeFields fields) {
  TimelineEvent e{.t = t, .worker = -1, .kind = EventKind::kMode};
  e.mode = std::move(fields);
  return e;
}

TimelineEvent MakeAmpEvent(double t, int worker, bool on) {
  return {.t = t, .worker = worker, .kind = on ? EventKind::kAmpOn : EventKind::kAmpOff};
}

TimelineEvent MakeBatchesEvent(double t, std::vector<int64_t> batches) {
  TimelineEvent e{.t = t, .worker = -1, .kind = EventKind::kBatches};
  e.batches = std::move(batches);
  return e;
}

TimelineEvent MakeTargetReachedEvent(double t, TargetFields fields) {
  TimelineEvent e{.t = t, .worker = -1, .kind = EventKind::kTargetReached};
  e.target = fields;
  return e;
}

TimelineEvent MakeSelectorFallbackEvent(double t, std::string reason) {
  TimelineEvent e{.t = t, .worker = -1, .kind = EventKind::kSelectorFallback};
  e.reason = std::move(reason);
  return e;
}

TimelineEvent MakeScheduleEvent(double t, ScheduleFields fields) {
  TimelineEvent e{.t = t, .worker = -1, .kind = EventKind::kSchedule};
  e.schedule = std::move(fields);
  return e;
}

}  // namespace star::op
