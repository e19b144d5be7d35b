#include "star/operator/reconciler/pod_group.h"

#include <string>

#include "reconciler/job_condition.h"
#include "star/operator/reconciler/job_objects.h"

namespace star::op {
namespace {

using nlohmann::json;

std::string SchedulerOf(const json& pod) {
  return pod.value("spec", json::object()).value("schedulerName", "");
}

}  // namespace

void ApplySchedulerName(const json& job, const api::TrainingJobSpec& spec, std::vector<json>* pods) {
  const std::string& scheduler = spec.run_policy.scheduler_name;
  if (scheduler.empty()) return;
  const std::string group = job["metadata"].value("name", "");
  for (json& pod : *pods) {
    pod["spec"]["schedulerName"] = scheduler;
    if (scheduler == kVolcanoScheduler) pod["metadata"]["annotations"][kVolcanoGroupAnnotation] = group;
  }
}

std::optional<json> DesiredPodGroup(const json& job, const std::vector<json>& pods) {
  if (pods.empty() || SchedulerOf(pods[0]) != kVolcanoScheduler) return std::nullopt;
  const json& meta = job["metadata"];
  return json{{"apiVersion", "scheduling.volcano.sh/v1beta1"},
              {"kind", "PodGroup"},
              {"metadata",
               {{"name", meta.value("name", "")},
                {"namespace", meta.value("namespace", "default")},
                {"labels", {{kJobLabel, meta.value("name", "")}}},
                {"ownerReferences", json::array({OwnerReference(job)})}}},
              {"spec", {{"minMember", static_cast<int64_t>(pods.size())}}}};
}

StatusOr<bool> EnsurePodGroup(kube::Client* client, StatusRecords* records, json* job, const std::vector<json>& pods) {
  const std::optional<json> want = DesiredPodGroup(*job, pods);
  if (!want) return true;
  const std::string ns = (*job)["metadata"].value("namespace", "default");
  const std::string name = (*want)["metadata"]["name"];
  // Read first: a reconcile of a job whose PodGroup exists writes nothing.
  StatusOr<json> existing = client->Get({"scheduling.volcano.sh", "v1beta1", "podgroups", true, "PodGroup"}, ns, name);
  if (!existing.ok() && existing.status().code() != StatusCode::kNotFound) return existing.status();
  StatusOr<json> created = existing;
  if (!existing.ok()) {
    created = client->Create({"scheduling.volcano.sh", "v1beta1", "podgroups", true, "PodGroup"}, ns, *want);
  }
  if (!created.ok() && created.status().code() == StatusCode::kNotFound) {
    STAR_RETURN_IF_ERROR(WriteJobCondition(
        records, job, kPodGroupCondition, false, "PodGroupUnsupported",
        "spec.runPolicy.schedulerName is volcano but the API server has no scheduling.volcano.sh/v1beta1 "
        "PodGroup resource: install Volcano, or name another scheduler; no pod is created until then"));
    return false;
  }
  if (!created.ok()) return created.status();  // AlreadyExists too: made meanwhile, read next time
  if (existing.ok()) {
    if (!IsControlledBy(*existing, (*job)["metadata"].value("uid", ""))) {
      STAR_RETURN_IF_ERROR(WriteJobCondition(records, job, kPodGroupCondition, false, "PodGroupNameTaken",
                                             "PodGroup " + name + " exists and is not controlled by this "
                                             "TrainingJob; delete or rename it"));
      return false;
    }
    if (existing->value("spec", json::object()).value("minMember", int64_t{0}) != (*want)["spec"]["minMember"]) {
      const json patch = {{"spec", {{"minMember", (*want)["spec"]["minMember"]}}}};
      auto patched = client->MergePatch({"scheduling.volcano.sh", "v1beta1", "podgroups", true, "PodGroup"}, ns, name, patch);
      if (!patched.ok()) return patched.status();
    }
  }
  STAR_RETURN_IF_ERROR(WriteJobCondition(records, job, kPodGroupCondition, true, "PodGroupCreated",
                                         "PodGroup " + name + " gangs the job's " +
                                             std::to_string(pods.size()) + " pods (minMember)"));
  return true;
}

}  // namespace star::op
