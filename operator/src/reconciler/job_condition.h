// One condition of a TrainingJob's status, written on its own: for the conditions that
// the phase logic does not own (Admitted, PodGroupReady).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "star/core/status.h"
#include "star/operator/reconciler/status_records.h"

namespace star::op {

// Sets condition `type` in `*job`'s status.conditions (in memory, keeping its
// lastTransitionTime while its status stays) and, when that changed anything, writes the
// conditions through `records`. The write's error.
[[nodiscard]] Status WriteJobCondition(StatusRecords* records, nlohmann::json* job, const std::string& type,
                                       bool status, const std::string& reason, const std::string& message);

}  // namespace star::op
