// The scheduler a TrainingJob's pods go to (spec.runPolicy.schedulerName) and, for
// Volcano, the job's gang: a PodGroup (scheduling.volcano.sh/v1beta1) named after the job
// whose minMember is the number of the job's pods, so that Volcano binds all of them or
// none. The PodGroup names the job as its controller owner: it goes with the job.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/training_job.h"
#include "star/core/status.h"
#include "star/kube/client.h"
#include "star/operator/reconciler/status_records.h"

namespace star::op {

inline constexpr char kVolcanoScheduler[] = "volcano";
// On each pod: the PodGroup it belongs to (Volcano's key).
inline constexpr char kVolcanoGroupAnnotation[] = "scheduling.k8s.io/group-name";
// The job's condition while its scheduler is Volcano.
inline constexpr char kPodGroupCondition[] = "PodGroupReady";

// Sets spec.schedulerName of every pod when the job names a scheduler; for Volcano also
// the group annotation. Nothing changes when schedulerName is empty.
void ApplySchedulerName(const nlohmann::json& job, const api::TrainingJobSpec& spec,
                        std::vector<nlohmann::json>* pods);

// The PodGroup that the job's desired pods need: nullopt unless they go to Volcano.
// minMember = the number of pods (not processes: a pod runs procsPerPod of them).
std::optional<nlohmann::json> DesiredPodGroup(const nlohmann::json& job, const std::vector<nlohmann::json>& pods);

// Makes (or keeps) the job's PodGroup when its pods go to Volcano; true when the pods may
// be created. False, with the condition PodGroupReady False saying why, when the API
// server has no PodGroup resource (Volcano is not installed) or another object holds the
// name; the caller retries later. Transient API errors are returned.
[[nodiscard]] StatusOr<bool> EnsurePodGroup(kube::Client* client, StatusRecords* records, nlohmann::json* job,
                                            const std::vector<nlohmann::json>& pods);

}  // namespace star::op
