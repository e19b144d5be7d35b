// The `star select` codec declared in selector.h.
#include <string>

#include "star/core/api/json_reader.h"
#include "star/core/select/selector.h"

namespace star::select {

using nlohmann::json;

StatusOr<SelectionInput> SelectionInputFromJson(const json& j) {
  SelectionInput in;
  api::ObjectReader rd(j, "");
  std::string arch;
  rd.Enum("architecture", &arch, {"AllReduce", "ParameterServer"})
      .Number("batch_per_worker", &in.batch_per_worker)
      .Greater("batch_per_worker", in.batch_per_worker, 0)
      .Number("noise_scale", &in.noise_scale)
      .AtLeast("noise_scale", in.noise_scale, 0)
      .NumberArray("iteration_seconds", &in.iteration_seconds);
  if (rd.ok() && in.iteration_seconds.empty()) rd.Fail("iteration_seconds", "must not be empty");
  for (size_t i = 0; rd.ok() && i < in.iteration_seconds.size(); ++i) {
    rd.Greater(api::IndexPath("iteration_seconds", i), in.iteration_seconds[i], 0);
  }
  rd.RejectUnknown({"architecture", "batch_per_worker", "noise_scale", "iteration_seconds"});
  if (!rd.ok()) return rd.status();
  in.architecture = *api::ParseArchitecture(arch);
  STAR_RETURN_IF_ERROR(Validate(in));
  return in;
}

json ToJson(const SelectionInput& in) {
  return {{"architecture", std::string(api::ToString(in.architecture))},
          {"batch_per_worker", in.batch_per_worker},
          {"noise_scale", in.noise_scale},
          {"iteration_seconds", in.iteration_seconds}};
}

json ToJson(const Candidate& c) {
  return {{"mode", std::string(api::ToString(c.mode))},
          {"k", c.k},
          {"groups", c.groups},
          {"update_interval_seconds", c.update_interval_seconds},
          {"effective_batch", c.effective_batch},
          {"estimated_seconds_per_progress", c.estimated_seconds_per_progress}};
}

json ToJson(const Selection& s, bool include_candidates) {
  json j = {{"mode", std::string(api::ToString(s.mode))},
            {"k", s.k},
            {"groups", s.groups},
            {"estimated_seconds_per_progress", s.estimated_seconds_per_progress}};
  if (include_candidates) {
    json list = json::array();
    for (const Candidate& c : s.candidates) list.push_back(ToJson(c));
    j["candidates"] = std::move(list);
  }
  return j;
}

}  // namespace star::select
