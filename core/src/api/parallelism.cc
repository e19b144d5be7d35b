#include "star/core/api/parallelism.h"

#include "star/core/api/json_reader.h"

namespace star::api {

using nlohmann::json;

namespace {

Status Invalid(const std::string& path, const std::string& reason) {
  return Status::InvalidArgument(path + ": " + reason);
}

std::string Named(const std::string& field, int64_t value) {
  return field + " (" + std::to_string(value) + ")";
}

// The ranges of each field alone.
Status CheckRanges(const ParallelismSpec& p, const std::string& at) {
  const std::string stages = JoinPath(at, "pipelineStages"), micro = JoinPath(at, "microBatches");
  if (p.pipeline_stages < 1 || p.pipeline_stages > kMaxPipelineStages) {
    return Invalid(stages, "must be in [1, " + std::to_string(kMaxPipelineStages) + "], got " +
                               std::to_string(p.pipeline_stages));
  }
  for (auto [field, value] : {std::pair{micro, p.micro_batches},
                               std::pair{JoinPath(at, "maxInFlightPerStage"),
                                         p.max_in_flight_per_stage.value_or(1)}}) {
    if (value < 1 || value > kMaxMicroBatches) {
      return Invalid(field, "must be in [1, " + std::to_string(kMaxMicroBatches) + "], got " +
                                std::to_string(value));
    }
  }
  return Status::Ok();
}

// The micro-batches and the memory bound against the stages.
Status CheckSchedule(const ParallelismSpec& p, const std::string& at) {
  const std::string stages = Named(JoinPath(at, "pipelineStages"), p.pipeline_stages);
  if (p.micro_batches < p.pipeline_stages) {
    return Invalid(JoinPath(at, "microBatches"),
                   "must be >= " + stages + ": with fewer a stage idles in every step, got " +
                       std::to_string(p.micro_batches));
  }
  if (!p.max_in_flight_per_stage) return Status::Ok();
  const int bound = *p.max_in_flight_per_stage;
  const std::string field = JoinPath(at, "maxInFlightPerStage");
  if (bound < p.pipeline_stages) {
    return Invalid(field, "must be >= " + stages +
                              ": a 1F1B schedule holds that many micro-batches on the first "
                              "stage, and no schedule fits a smaller bound, got " +
                              std::to_string(bound));
  }
  if (bound > p.micro_batches) {
    return Invalid(field, "must be <= " + Named(JoinPath(at, "microBatches"), p.micro_batches) +
                              ", got " + std::to_string(bound));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ParallelismSpec> ParallelismFromJson(const json& j, const std::string& path) {
  ParallelismSpec p;
  ObjectReader rd(j, path);
  rd.Int("pipelineStages", &p.pipeline_stages, Need::kOptional);
  rd.Int("microBatches", &p.micro_batches, Need::kOptional);
  if (rd.ok() && rd.Has("maxInFlightPerStage")) {
    rd.Int("maxInFlightPerStage", &p.max_in_flight_per_stage.emplace());
  }
  rd.RejectUnknown({"pipelineStages", "microBatches", "maxInFlightPerStage"});
  if (!rd.ok()) return rd.status();
  return p;
}

json ToJson(const ParallelismSpec& p) {
  json j = {{"pipelineStages", p.pipeline_stages}, {"microBatches", p.micro_batches}};
  if (p.max_in_flight_per_stage) j["maxInFlightPerStage"] = *p.max_in_flight_per_stage;
  return j;
}

Status ValidateParallelism(const ParallelismSpec& p, int64_t world, const std::string& world_field,
                           int64_t global_batch, bool all_reduce, const std::string& path) {
  const std::string at = JoinPath(path, "parallelism");
  STAR_RETURN_IF_ERROR(CheckRanges(p, at));
  STAR_RETURN_IF_ERROR(CheckSchedule(p, at));
  if (IsPipeline(p) && !all_reduce) {
    return Invalid(JoinPath(at, "pipelineStages"),
                   "a pipeline needs " + JoinPath(path, "architecture") + " AllReduce");
  }
  if (world % p.pipeline_stages != 0) {
    return Invalid(JoinPath(at, "pipelineStages"),
                   "must divide " + Named(world_field, world) +
                       ": every data-parallel replica runs every stage (rank = replica * "
                       "pipelineStages + stage)");
  }
  const int64_t replicas = world / p.pipeline_stages;
  if (global_batch < replicas * p.micro_batches) {
    return Invalid(JoinPath(path, "training.globalBatchSize"),
                   "must be >= " + std::to_string(replicas) + " data-parallel replicas * " +
                       Named(JoinPath(at, "microBatches"), p.micro_batches) +
                       ": every micro-batch needs a sample, got " + std::to_string(global_batch));
  }
  if (IsPipeline(p) && global_batch % (replicas * p.micro_batches) != 0) {
    return Invalid(JoinPath(path, "training.globalBatchSize"),
                   "must be a multiple of " + std::to_string(replicas) +
                       " data-parallel replicas * " +
                       Named(JoinPath(at, "microBatches"), p.micro_batches) +
                       ": every replica splits its share into equal micro-batches, got " +
                       std::to_string(global_batch));
  }
  return Status::Ok();
}

std::vector<std::pair<std::string, std::string>> PipelineEnv(const ParallelismSpec& p) {
  if (!IsPipeline(p)) return {};
  std::vector<std::pair<std::string, std::string>> env = {
      {"STAR_PIPELINE_STAGES", std::to_string(p.pipeline_stages)},
      {"STAR_MICRO_BATCHES", std::to_string(p.micro_batches)},
  };
  if (p.max_in_flight_per_stage) env.emplace_back("STAR_MAX_IN_FLIGHT", std::to_string(*p.max_in_flight_per_stage));
  return env;
}

}  // namespace star::api
