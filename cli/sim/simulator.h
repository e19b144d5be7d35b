// The `star sim` driver: one job's discrete-event simulation against the real control
// loop (operator/control_loop.h), the same loop `star local` and the operator run.
//
// Simulated workers (worker_model.h) run the sync mode in force (mode_engine.h); every
// `report_every` iterations each sends a WorkerReport (job-relative time, per-iteration
// compute / communication / wait means, its batch and AMP flag, and the squared gradient
// norms the noise-scale estimate reads: 1 + phi / b for its local batch b and for the
// update's batch, as for a gradient of norm 1 and noise trace phi). Reports reach the
// loop in time order; a decision it returns becomes pending and applies when every worker
// has reached its apply_at_iteration: the workers wait for each other there (the engine's
// switch), and the next mode starts from that barrier with the decision's AMP flags and
// batches (a worker's compute time is linear in its batch). At the switch the model's
// progress takes what the shim does to the model (Progress::Switch: the momentum
// restarts, and with the scenario's group_replicas the groups' copies are averaged).
//
// The run ends when the target is reached (Progress, progress.h) or the simulated time
// passes TimeLimitSeconds (tta null). Deterministic for a scenario and seed. Not
// thread-safe (separate calls are independent).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "local/runtime.h"
#include "sim/scenario.h"
#include "star/core/api/training_job.h"
#include "star/core/select/learned.h"
#include "star/operator/loop_options.h"
#include "star/operator/timeline.h"
#include "star/core/status.h"

namespace star::sim {

struct SimOptions {
  // spec.synchronization.selector. With ML (and policy auto) the loop selects through
  // `model`; without one it falls back to the heuristic. Default Heuristic.
  api::ModeSelector selector = api::ModeSelector::kHeuristic;
  // The learned selector for selector ML (shared by the runs; Simulate is single-threaded).
  // Default none.
  std::shared_ptr<select::LearnedSelector> model;
  // The loop's Select() options (core's select/selector.h: among them how clearly the
  // learned model must prefer its class to override the heuristic's). Default those of
  // op::LoopOptions; min_k comes from the scenario.
  select::SelectOptions select = op::LoopOptions{}.select;
  // When set, every completed worker iteration is written as one CSV row
  // "iteration,worker,compute_seconds,communication_seconds" (`star detect`'s trace form,
  // cli/trace_csv.h; the caller writes the header).
  std::ostream* trace = nullptr;
};

struct SimResult {
  std::string policy;                 // local::ToString(policy)
  std::optional<double> tta_seconds;  // simulated seconds; nullopt when not reached
  int64_t updates = 0;                // model updates applied
  int64_t iterations = 0;             // the largest iteration count of any worker
  int64_t decisions = 0;              // decisions the control loop issued
  // The control loop's timeline (stragglers flagged and recovered, modes, batches, AMP,
  // the target), as the operator and `star local` record it. Not part of ToJson.
  std::vector<op::TimelineEvent> timeline;
  // A pipeline's median iteration under static 1F1B and under the loop's depths
  // (nullopt when none ran that way); in ToJson for pipelines only.
  bool pipeline = false;
  std::optional<double> static_iteration_seconds, adapted_iteration_seconds;
};

// The TrainingJob spec the scenario describes (before any --policy): its architecture
// (with `parameter_servers` servers for ParameterServer), workers, global batch
// workers x batch_per_worker (a pipeline: replicas x batch_per_worker, and its
// parallelism), min_k; everything else the defaults.
[[nodiscard]] api::TrainingJobSpec JobSpecOf(const Scenario& s);

// Simulates the job under `policy` (mapped onto the spec by local::ApplyPolicy, as
// `star local --policy` does); a pipeline by SimulatePipeline (pipeline_run.h). Errors: the control loop's Create errors, and Internal if
// the loop rejects a simulated report (a simulator bug).
[[nodiscard]] StatusOr<SimResult> Simulate(const Scenario& s, local::Policy policy,
                                           const SimOptions& options = {});

// {"policy","tta_seconds" (null when not reached),"updates","iterations","decisions"}, and
// for a pipeline "static_iteration_seconds" and "adapted_iteration_seconds" (null when none).
nlohmann::json ToJson(const SimResult& r);

}  // namespace star::sim
