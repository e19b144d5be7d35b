#include "star/core/api/pipeline_status.h"

#include "star/core/api/json_reader.h"
#include "star/core/api/meta.h"
#include "star/core/api/parallelism.h"

namespace star::api {

using nlohmann::json;

namespace {

// The depths: 2 to kMaxPipelineStages of them, each in [1, kMaxMicroBatches].
void ReadWarmup(ObjectReader& rd, std::vector<int>* out) {
  rd.MaxItems("warmup", kMaxPipelineStages);
  const json* w = rd.ok() ? rd.Get("warmup") : nullptr;
  if (w == nullptr) {
    rd.Fail("warmup", "required field is missing");
    return;
  }
  StatusOr<std::vector<int>> depths = IntListFromJson(*w, rd.FieldPath("warmup"));
  rd.Merge(depths.status());
  if (!rd.ok()) return;
  if (depths->size() < 2) {
    rd.Fail("warmup", "must have one depth per stage (at least 2), got " + std::to_string(depths->size()));
    return;
  }
  for (size_t i = 0; i < depths->size(); ++i) {
    const int d = (*depths)[i];
    if (d < 1 || d > kMaxMicroBatches) {
      rd.Fail(IndexPath("warmup", i),
              "must be in [1, " + std::to_string(kMaxMicroBatches) + "], got " + std::to_string(d));
      return;
    }
  }
  *out = *std::move(depths);
}

// slowLink {fromStage, toStage}: neighbours, fromStage before the last stage.
void ReadSlowLink(ObjectReader& rd, int stages, int* out) {
  const json* l = rd.ok() ? rd.Get("slowLink") : nullptr;
  if (l == nullptr) return;
  ObjectReader lr(*l, rd.FieldPath("slowLink"));
  int from = 0, to = 0;
  lr.Int("fromStage", &from)
      .AtLeast("fromStage", from, 0)
      .AtMost("fromStage", from, stages - 2)
      .Int("toStage", &to)
      .RejectUnknown({"fromStage", "toStage"});
  if (lr.ok() && to != from + 1) {
    lr.Fail("toStage", "must be fromStage + 1 (" + std::to_string(from + 1) + "), got " + std::to_string(to));
  }
  rd.Merge(lr.status());
  if (rd.ok()) *out = from;
}

}  // namespace

StatusOr<PipelineScheduleStatus> PipelineScheduleStatusFromJson(const json& j, const std::string& path) {
  PipelineScheduleStatus s;
  ObjectReader rd(j, path);
  ReadWarmup(rd, &s.warmup);
  rd.Number("predictedIterationSeconds", &s.predicted_iteration_seconds, Need::kOptional)
      .AtLeast("predictedIterationSeconds", s.predicted_iteration_seconds, 0)
      .AtMost("predictedIterationSeconds", s.predicted_iteration_seconds, kMaxJsonInteger);
  ReadSlowLink(rd, static_cast<int>(s.warmup.size()), &s.slow_link);
  rd.RejectUnknown({"warmup", "predictedIterationSeconds", "slowLink"});
  if (!rd.ok()) return rd.status();
  return s;
}

json ToJson(const PipelineScheduleStatus& s) {
  json j = {{"warmup", s.warmup}, {"predictedIterationSeconds", s.predicted_iteration_seconds}};
  if (s.slow_link >= 0) j["slowLink"] = {{"fromStage", s.slow_link}, {"toStage", s.slow_link + 1}};
  return j;
}

}  // namespace star::api
