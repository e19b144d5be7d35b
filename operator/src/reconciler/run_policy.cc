#include "star/operator/reconciler/run_policy.h"

#include "star/kube/time.h"

namespace star::op {

using nlohmann::json;
using std::chrono::milliseconds;

std::optional<milliseconds> TimeLeft(const std::string& since, int64_t seconds,
                                     std::chrono::system_clock::time_point now) {
  if (since.empty()) return std::nullopt;
  const auto start = kube::ParseRfc3339(since);
  if (!start) return std::nullopt;
  const auto end = *start + std::chrono::seconds(seconds);
  return std::chrono::duration_cast<milliseconds>(end - now);
}

milliseconds SoonerWait(milliseconds a, milliseconds b) {
  if (a.count() <= 0) return b;
  if (b.count() <= 0) return a;
  return std::min(a, b);
}

json StatusTimes(const json& old_status, const PhaseDecision& d, const std::string& now) {
  using api::JobPhase;
  json out = json::object();
  const bool started = old_status.contains("startTime");
  if (d.phase == JobPhase::kSuspended && started) out["startTime"] = nullptr;
  if (d.action == JobPodsAction::kCreateMissing && !started) out["startTime"] = now;
  const bool terminal = d.phase == JobPhase::kSucceeded || d.phase == JobPhase::kFailed;
  if (terminal && !old_status.contains("completionTime")) out["completionTime"] = now;
  return out;
}

}  // namespace star::op
