// Scenario: what `star sim` simulates: one job's workers, how long their iterations take,
// the contention episodes that slow them, and the convergence target (ALGORITHMS.md
// section 2). Times are simulated seconds from the job's start.
//
// JSON form (the contract of docs/ARCHITECTURE.md, "Simulator", plus optional fields):
//   {"architecture": "AllReduce" | "ParameterServer",      optional, default AllReduce
//    "workers": N,                                         required, >= 1
//    "batch_per_worker": B,                                required, >= 1
//    "noise_scale": PHI,                                   required, >= 0
//    "min_updates": S,                                     required, > 0
//    "compute_seconds_per_sample": C,                      required, > 0
//    "communication_seconds": M,                           required, >= 0
//    "jitter": J,                                          optional, in [0, 1], default 0
//    "episodes": [{"worker": W, "start": T0, "end": T1, "cpu": F, "bandwidth": F,
//                  "delay": D, "peer": P}, ...],
//    "seed": K,                                            optional, >= 0, default 1
//    "pipeline": {...},                                    optional: PipelineScenario
//    ... and the optional fields of Scenario below, under their names}
// An episode needs cpu, bandwidth or (pipelines) delay; start defaults to 0; without end it lasts to
// the end of the run. Unknown fields are rejected everywhere.
//
// A pipeline-parallel job (`pipeline` given) has workers = stages x data-parallel
// replicas (rank = replica x stages + stage), batch_per_worker is one replica's batch per
// iteration (a multiple of micro_batches), compute_seconds_per_sample is optional and
// unused, and communication_seconds is the replicas' all-reduce per iteration (unused with
// one replica). Its iterations take the pipeline model's time (core pipeline/schedule.h)
// for the stage and link costs at the iteration's start, plus outside_seconds.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/types.h"
#include "star/core/pipeline/schedule.h"
#include "star/core/status.h"

namespace star::sim {

// Default AMP speedup of a worker's compute (Korel reports 1.3-2x for bf16/fp16 on
// contended workers; not calibrated against this project's testbed yet).
inline constexpr double kDefaultAmpSpeedup = 1.6;
// Default staleness penalty: a gradient computed on parameters s updates old counts its
// samples at 1 / (1 + penalty x s) (see progress.h). Not calibrated yet.
inline constexpr double kDefaultStalenessPenalty = 0.1;
// Default extra CPU and bandwidth ASGD needs over SSGD: the low ends of STAR's measured
// 44-351% and 38-427% (ALGORITHMS.md section 3).
inline constexpr double kDefaultAsgdCpuOverhead = 0.44;
inline constexpr double kDefaultAsgdBandwidthOverhead = 0.38;
// Default bound on simulated time, as a multiple of the clean SSGD estimate
// (CleanSsgdSeconds): a policy that has not reached the target by then reports null.
inline constexpr double kDefaultTimeLimitFactor = 100;

// A contention episode on one worker over [start, end) simulated seconds.
struct Episode {
  int worker = 0;                   // rank in [0, workers)
  double start = 0;                 // >= 0
  std::optional<double> end;        // > start; nullopt = to the end of the run
  std::optional<double> cpu;        // in (0, 1]: fraction of its compute speed kept
  std::optional<double> bandwidth;  // in (0, 1]: fraction of its link kept
  // Pipelines only: seconds in (0, 10] every message between the worker and `peer` (its
  // neighbouring stage in the same replica) is held both ways, as `star local --inject
  // worker=W,delay=D,peer=P` does. Both or neither.
  std::optional<double> delay;
  std::optional<int> peer;
};

// The stages' costs of a pipeline-parallel job, clean: per micro-batch and per message.
struct PipelineScenario {
  int stages = 2;                       // S in [2, 64]; workers a multiple of it
  int micro_batches = 2;                // M in [S, 1024]; divides batch_per_worker
  std::optional<int> max_in_flight;     // spec.parallelism.maxInFlightPerStage, >= S
  std::vector<double> forward_seconds;  // S entries, each >= 0
  std::vector<double> backward_seconds;  // S entries, each >= 0
  double activation_seconds = 0;        // >= 0: one activation over any link
  double gradient_seconds = 0;          // >= 0: one gradient over any link
  double outside_seconds = 0;           // >= 0: per iteration, outside the schedule
};

struct Scenario {
  api::Architecture architecture = api::Architecture::kAllReduce;
  int workers = 1;
  int64_t batch_per_worker = 1;
  double noise_scale = 0;                 // phi, in samples
  double min_updates = 1;                 // updates at infinite batch the target needs
  double compute_seconds_per_sample = 0;  // a clean worker's compute, full precision
  double communication_seconds = 0;       // a clean worker's communication per iteration
  // Relative spread of every compute and communication time: each is multiplied by a
  // log-normal factor of mean 1 and standard deviation about `jitter`. Default 0.
  double jitter = 0;
  std::vector<Episode> episodes;
  uint64_t seed = 1;
  std::optional<PipelineScenario> pipeline;
  // Optional fields (JSON name = field name):
  int report_every = 2;  // iterations per WorkerReport, >= 1 (local mode's default)
  double amp_speedup = kDefaultAmpSpeedup;  // compute speedup with AMP on, >= 1
  // Whether the workers can run mixed precision. false: the loop runs with
  // spec.mitigation.amp off, as `star local` does on a CPU without native bf16.
  bool amp_available = true;
  double staleness_penalty = kDefaultStalenessPenalty;            // >= 0
  // The optimizer's momentum, in [0, 1): the shim restarts it at every switch, and the
  // updates after one are worth less until it is back (progress.h). Default 0: a switch
  // costs no progress.
  double momentum = 0;
  // Mode groups trains one copy of the model per group, averaged over the workers at the
  // next switch, and the target is judged on rank 0's copy, as the shim runs it
  // (progress.h). Default false: every group's updates advance one model, as STAR's
  // cost model T_dyn assumes.
  bool group_replicas = false;
  double asgd_cpu_overhead = kDefaultAsgdCpuOverhead;              // >= 0
  double asgd_bandwidth_overhead = kDefaultAsgdBandwidthOverhead;  // >= 0
  // Parameter servers of a ParameterServer job (and of the one ASGD runs on), >= 1.
  int parameter_servers = 1;
  // Seconds a parameter server spends applying one gradient (split across the servers:
  // each holds 1/parameter_servers of the model); gradients queue for it. >= 0,
  // default 0 (the servers are never the bottleneck).
  double server_update_seconds = 0;
  // TrainingJob spec.mitigation.detection.window (reports in the detector's window),
  // >= 3 when set; default the spec's default.
  std::optional<int> detection_window;
  // TrainingJob spec.synchronization.minK, in [1, workers] when set.
  std::optional<int> min_k;
  // Simulated seconds after which a run stops without reaching the target; > 0.
  // Default kDefaultTimeLimitFactor x CleanSsgdSeconds(scenario).
  std::optional<double> max_seconds;
};

// Decodes and validates a scenario document. Errors name the field:
// "workers: must be >= 1, got 0", "episodes[1].cpu: must be in (0, 1], got 2",
// "episodes[0].worker: must be < workers (4), got 7", "foo: unknown field",
// "episodes[0].peer: must be a neighbouring stage of worker 1 in its replica, got 3".
[[nodiscard]] StatusOr<Scenario> ScenarioFromJson(const nlohmann::json& j);

// The scenario as a document ScenarioFromJson reads back to the same scenario (every
// field written, optional ones included; an unset end, cpu or bandwidth left out).
[[nodiscard]] nlohmann::json ScenarioToJson(const Scenario& s);

// The pipeline's costs with no episode: every link the same.
[[nodiscard]] pipeline::PipelineCosts CleanCosts(const PipelineScenario& p);

// The TTA of SSGD without any episode or jitter: min_updates x (1 + phi / (n B)) x
// (B x compute_seconds_per_sample + communication_seconds). For a pipeline: min_updates
// x (1 + phi / (replicas B)) x (static 1F1B's iteration by the model + outside_seconds
// + communication_seconds with more than one replica).
[[nodiscard]] double CleanSsgdSeconds(const Scenario& s);
// max_seconds, or its default.
[[nodiscard]] double TimeLimitSeconds(const Scenario& s);

}  // namespace star::sim
