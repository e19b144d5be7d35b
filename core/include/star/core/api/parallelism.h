// spec.parallelism of a TrainingJob: pipeline parallelism (ALGORITHMS.md section 7).
//
// A pipeline job splits its model into S = pipelineStages stages, one worker process
// each, and every iteration's batch into M = microBatches micro-batches that flow
// through the stages on a 1F1B schedule. Worker rank = replica * S + stage, so the world
// size (workers.replicas * workers.procsPerPod) is S times the number of data-parallel
// replicas D, and the data-parallel modes apply across the replicas of a stage.
//
// Wire form: "parallelism": {"pipelineStages": 4, "microBatches": 8,
//                            "maxInFlightPerStage": 6}
// Absent = one stage of one micro-batch (a data-parallel job). The rules (Validate, and
// the CRD's CEL rules alike):
//   * pipelineStages in [1, kMaxPipelineStages]; microBatches and maxInFlightPerStage in
//     [1, kMaxMicroBatches];
//   * microBatches >= pipelineStages (with fewer a stage idles in every step);
//   * maxInFlightPerStage, the micro-batches a stage holds activations for (its memory
//     bound), >= pipelineStages (1F1B holds that many on the first stage: no schedule
//     fits less) and <= microBatches;
//   * more than one stage needs architecture AllReduce; the world size is a multiple
//     of pipelineStages; globalBatchSize a multiple of D * microBatches (equal micro-batches).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/status.h"

namespace star::api {

// Upper bound of spec.parallelism.pipelineStages.
inline constexpr int kMaxPipelineStages = 64;
// Upper bound of spec.parallelism.microBatches and maxInFlightPerStage.
inline constexpr int kMaxMicroBatches = 1024;

struct ParallelismSpec {
  int pipeline_stages = 1;  // wire "pipelineStages"
  int micro_batches = 1;    // wire "microBatches"
  // Micro-batches in flight per stage at most; unset = what the schedule chooses.
  std::optional<int> max_in_flight_per_stage;  // wire "maxInFlightPerStage"

  friend bool operator==(const ParallelismSpec&, const ParallelismSpec&) = default;
};

// More than one stage.
inline bool IsPipeline(const ParallelismSpec& p) { return p.pipeline_stages > 1; }

// The variables a pipeline's processes read, as (name, value): STAR_PIPELINE_STAGES,
// STAR_MICRO_BATCHES, and STAR_MAX_IN_FLIGHT when set (a process's stage is its rank
// modulo the stages). None for a data-parallel job.
std::vector<std::pair<std::string, std::string>> PipelineEnv(const ParallelismSpec& p);
// A worker's stage and data-parallel replica (rank = replica * stages + stage).
inline int StageOf(int rank, const ParallelismSpec& p) { return rank % p.pipeline_stages; }
inline int ReplicaOf(int rank, const ParallelismSpec& p) { return rank / p.pipeline_stages; }

// Decodes the section (an object; unknown fields refused) at `path`, without the
// cross-field rules.
StatusOr<ParallelismSpec> ParallelismFromJson(const nlohmann::json& j, const std::string& path);
// Every field, defaults included.
nlohmann::json ToJson(const ParallelismSpec& p);

// The rules that involve only the section and the job's shape: `world` worker processes
// (named `world_field` in errors), `global_batch`, and whether the job is AllReduce.
// `path` is the spec's path ("spec").
[[nodiscard]] Status ValidateParallelism(const ParallelismSpec& p, int64_t world,
                                         const std::string& world_field, int64_t global_batch,
                                         bool all_reduce, const std::string& path);

}  // namespace star::api
