#include "star/operator/reconciler/queueing.h"

#include <string>

#include "reconciler/job_condition.h"

namespace star::op {
namespace {

using nlohmann::json;

constexpr size_t kMaxLabelValue = 63;

// The condition `type` of a Kueue Workload; nullptr when absent.
const json* WorkloadCondition(const json& workload, const std::string& type) {
  const json status = workload.value("status", json::object());
  if (!status.contains("conditions") || !status["conditions"].is_array()) return nullptr;
  for (const json& c : workload["status"]["conditions"]) {
    if (c.is_object() && c.value("type", "") == type) return &c;
  }
  return nullptr;
}

// Why a Workload without quota waits, in Kueue's words (QuotaReserved False: reason
// Pending with "couldn't assign flavors ... insufficient quota ...", or Inadmissible with
// "LocalQueue q doesn't exist").
Admission Waiting(const std::string& group, const StatusOr<json>& workload) {
  if (!workload.ok()) {
    if (workload.status().code() == StatusCode::kNotFound) {
      return {false, "WaitingForWorkload", "Kueue has not made Workload " + group + " for the pods yet"};
    }
    return {false, "WaitingForWorkload", "Workload " + group + ": " + workload.status().message()};
  }
  const json* reserved = WorkloadCondition(*workload, "QuotaReserved");
  if (reserved == nullptr || reserved->value("status", "") == "True") {
    return {false, "WaitingForQuota", "Workload " + group + " waits for Kueue to admit it"};
  }
  const std::string reason = reserved->value("reason", "");
  const std::string message = reserved->value("message", "");
  if (reason == "Inadmissible") {
    const bool missing = message.find("doesn't exist") != std::string::npos;
    return {false, missing ? "QueueMissing" : "Inadmissible", message};
  }
  return {false, "WaitingForQuota", message.empty() ? "Workload " + group + ": " + reason : message};
}

}  // namespace

std::optional<std::string> KueueQueueOf(const json& job) {
  const json labels = job.value("metadata", json::object()).value("labels", json::object());
  if (!labels.contains(kKueueQueueLabel) || !labels[kKueueQueueLabel].is_string()) return std::nullopt;
  const std::string queue = labels[kKueueQueueLabel];
  if (queue.empty()) return std::nullopt;
  return queue;
}

std::string KueuePodGroupName(const json& job) {
  const json meta = job.value("metadata", json::object());
  std::string name = meta.value("name", "");
  const std::string uid = meta.value("uid", "");
  if (uid.empty()) return name.substr(0, kMaxLabelValue);
  const std::string suffix = "-" + uid.substr(0, 8);
  return name.substr(0, kMaxLabelValue - suffix.size()) + suffix;
}

void ApplyKueuePodGroup(const json& job, std::vector<json>* pods) {
  const std::optional<std::string> queue = KueueQueueOf(job);
  if (!queue) return;
  const std::string group = KueuePodGroupName(job);
  const std::string total = std::to_string(pods->size());
  for (json& pod : *pods) {
    json& meta = pod["metadata"];
    meta["labels"][kKueueQueueLabel] = *queue;
    meta["labels"][kKueueManagedLabel] = "true";
    meta["labels"][kKueuePodGroupLabel] = group;
    meta["annotations"][kKueueGroupTotalCountAnnotation] = total;
    json& gates = pod["spec"]["schedulingGates"];
    if (!gates.is_array()) gates = json::array();
    if (!GatedByKueue(pod)) gates.push_back({{"name", kKueueAdmissionGate}});
  }
}

bool GatedByKueue(const json& pod) {
  const json spec = pod.value("spec", json::object());
  for (const json& g : spec.value("schedulingGates", json::array())) {
    if (g.is_object() && g.value("name", "") == kKueueAdmissionGate) return true;
  }
  return false;
}

std::optional<Admission> AdmissionOf(const json& job, const std::map<std::string, json>& pods,
                                     const StatusOr<json>& workload) {
  if (!KueueQueueOf(job) || pods.empty()) return std::nullopt;
  const std::string group = KueuePodGroupName(job);
  bool gated = false;
  for (const auto& [name, pod] : pods) gated |= GatedByKueue(pod);
  if (!gated) return Admission{true, "Admitted", "Kueue admitted pod group " + group};
  if (workload.ok()) {
    const json* admitted = WorkloadCondition(*workload, "Admitted");
    if (admitted != nullptr && admitted->value("status", "") == "True") {
      return Admission{true, "Admitted", admitted->value("message", "Kueue admitted pod group " + group)};
    }
  }
  return Waiting(group, workload);
}

StatusOr<std::chrono::milliseconds> SyncAdmittedCondition(kube::Client* client, StatusRecords* records, json* job,
                                                          const std::map<std::string, json>& pods) {
  if (!KueueQueueOf(*job)) return std::chrono::milliseconds(0);
  bool gated = false;
  for (const auto& [name, pod] : pods) gated |= GatedByKueue(pod);
  const std::string ns = (*job)["metadata"].value("namespace", "default");
  StatusOr<json> workload = Status::NotFound("not read");
  if (gated) workload = client->Get({"kueue.x-k8s.io", "v1beta2", "workloads", true, "Workload"}, ns,
                                    KueuePodGroupName(*job));
  const std::optional<Admission> a = AdmissionOf(*job, pods, workload);
  if (!a) return std::chrono::milliseconds(0);
  STAR_RETURN_IF_ERROR(WriteJobCondition(records, job, kAdmittedCondition, a->admitted, a->reason, a->message));
  return gated ? kAdmissionRecheck : std::chrono::milliseconds(0);
}

}  // namespace star::op
