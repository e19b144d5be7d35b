// spec.runPolicy's clocks: when a job's activeDeadlineSeconds or ttlSecondsAfterFinished
// runs out, and the status times they count from (status.startTime, completionTime).
// Pure: the time comes in as a parameter.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "star/operator/reconciler/job_objects.h"

namespace star::op {

// Time left at `now` until `seconds` after the RFC 3339 time `since` (<= 0: passed);
// nullopt when `since` is empty or not RFC 3339.
std::optional<std::chrono::milliseconds> TimeLeft(const std::string& since, int64_t seconds,
                                                  std::chrono::system_clock::time_point now);

// The sooner of two requeue waits, where 0 means no requeue.
std::chrono::milliseconds SoonerWait(std::chrono::milliseconds a, std::chrono::milliseconds b);

// The status.startTime / completionTime changes that decision `d` makes to `old_status`,
// as merge-patch entries (null removes): startTime becomes `now` when pods are created
// from none (no startTime yet) and goes when the job is suspended; completionTime
// becomes `now` when the job first reaches Succeeded or Failed. Empty when unchanged.
nlohmann::json StatusTimes(const nlohmann::json& old_status, const PhaseDecision& d, const std::string& now);

}  // namespace star::op
