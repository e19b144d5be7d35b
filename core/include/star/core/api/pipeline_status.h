// The pipeline schedule a TrainingJob's status records (wire "status.pipeline"): the
// warm-up depths of the latest decision, the model's prediction for them and the link
// they absorb. Absent while the job runs its static schedule (and for data-parallel jobs).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::api {

struct PipelineScheduleStatus {
  // One depth per stage: 2 to kMaxPipelineStages of them, each in [1, kMaxMicroBatches].
  std::vector<int> warmup;
  // The model's iteration time under `warmup` (seconds, finite, >= 0); wire
  // "predictedIterationSeconds".
  double predicted_iteration_seconds = 0;
  // The link `warmup` absorbs by the stage it leaves (in [0, warmup.size() - 1)), or -1;
  // wire "slowLink": {"fromStage": s, "toStage": s + 1}, absent for -1.
  int slow_link = -1;

  friend bool operator==(const PipelineScheduleStatus&, const PipelineScheduleStatus&) = default;
};

// Required: warmup. Optional: predictedIterationSeconds (default 0), slowLink. Errors
// name the field under `path` ("status.pipeline.slowLink.toStage: must be fromStage + 1
// (2), got 3"); unknown fields are rejected.
StatusOr<PipelineScheduleStatus> PipelineScheduleStatusFromJson(const nlohmann::json& j,
                                                                const std::string& path);
nlohmann::json ToJson(const PipelineScheduleStatus& s);

}  // namespace star::api
