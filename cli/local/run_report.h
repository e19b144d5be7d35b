// The report of one `star local` run (RunResult::report, see runtime.h) and the live
// progress line, from what the runtime observed.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "local/injector.h"
#include "local/run_event.h"
#include "star/core/api/decision.h"
#include "star/core/api/training_job.h"
#include "star/operator/control_loop.h"

namespace star::local {

// What the report is made of; every field is copied into it as is.
struct ReportInputs {
  std::string job;
  std::string policy;                       // ToString(Policy)
  const api::TrainingJobSpec* spec = nullptr;  // required
  std::string outcome;
  double wall_seconds = 0;
  std::optional<double> tta;
  std::optional<double> final_accuracy;
  int64_t iterations = 0;
  int workers = 0;
  int servers = 0;
  int64_t worker_millicores = 0;
  bool network = false;
  int decisions = 0;
  const api::Decision* current = nullptr;   // the loop's current decision, if any
  std::vector<int> stragglers;              // workers ever flagged
  // The runtime's events and the control loop's, each in the order they happened. The
  // timeline has both, by t; at equal t the runtime's come first.
  std::vector<RunEvent> run_events;
  std::vector<op::TimelineEvent> loop_events;
  const std::vector<ActiveInjection>* injections = nullptr;  // required
  // (t, accuracy) in arrival order: the report's accuracy_curve[] of [t, accuracy].
  const std::vector<std::pair<double, double>>* accuracy_curve = nullptr;  // required
  const nlohmann::json* samples = nullptr;                                 // required
};

nlohmann::json BuildReport(const ReportInputs& in);

// The report's timeline[] of {t, event, worker, detail}: the loop's events rendered as
// their report strings (op::EventName, op::EventDetail), merged with the runtime's by t
// (at equal t the runtime's first).
nlohmann::json TimelineJson(const std::vector<RunEvent>& run_events,
                            const std::vector<op::TimelineEvent>& loop_events);

// Sets what the control loop is the one source of: tta, final_accuracy and
// accuracy_curve (op::JobControlLoop::tta_seconds, accuracy, accuracy_curve, whatever
// measured the accuracy: the bundled evaluator or the workers' own reports), current
// and loop_events. The curve is referenced: `loop` must outlive BuildReport(*in).
void SetLoopFields(const op::JobControlLoop& loop, ReportInputs* in);

// What the progress line shows.
struct ProgressInputs {
  double t = 0;
  int64_t iteration = 0;
  std::optional<double> accuracy;
  std::optional<double> target_accuracy;  // none: no TTA
  const api::Decision* current = nullptr;
  std::vector<int> stragglers;
  const std::vector<std::pair<double, double>>* accuracy_curve = nullptr;  // required
  bool target_reached = false;
};

// Sets accuracy, current, stragglers, accuracy_curve and target_reached from the loop
// (as SetLoopFields for the report; `loop` must outlive ProgressLine(*in)).
void SetLoopFields(const op::JobControlLoop& loop, ProgressInputs* in);

// "[12.3s] iteration 40  accuracy 0.712/0.800  mode ssgd  stragglers [1]  amp []  eta 30s"
// (eta: EstimateEtaSeconds, eta.h; "eta unknown" when it cannot be estimated; no eta
// without a target or once it is reached).
std::string ProgressLine(const ProgressInputs& in);

}  // namespace star::local
