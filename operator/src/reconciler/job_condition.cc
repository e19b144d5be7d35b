#include "reconciler/job_condition.h"

#include <vector>

#include "star/core/api/meta.h"
#include "star/kube/time.h"
#include "star/operator/reconciler/job_objects.h"

namespace star::op {

using nlohmann::json;

Status WriteJobCondition(StatusRecords* records, json* job, const std::string& type, bool status,
                         const std::string& reason, const std::string& message) {
  json& st = (*job)["status"];
  if (!st.is_object()) st = json::object();
  std::vector<api::Condition> conditions;
  for (const json& c : st.value("conditions", json::array())) {
    auto parsed = api::ConditionFromJson(c, "status.conditions");
    if (parsed.ok()) conditions.push_back(*parsed);
  }
  const std::vector<api::Condition> before = conditions;
  SetCondition(&conditions, type, status, reason, message, kube::NowRfc3339(),
               (*job)["metadata"].value("generation", int64_t{0}));
  if (conditions == before) return Status::Ok();
  json cj = json::array();
  for (const auto& c : conditions) cj.push_back(api::ToJson(c));
  st["conditions"] = cj;
  return records->WritePhase(*job, {{"status", {{"conditions", cj}}}});
}

}  // namespace star::op
