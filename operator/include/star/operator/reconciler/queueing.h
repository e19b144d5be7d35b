// Admission through Kueue, by Kueue's pod-group integration: a TrainingJob labelled
// kueue.x-k8s.io/queue-name has its pods made as one Kueue pod group (one Workload, named
// after the group, admitted all at once). The pods are created gated; Kueue removes the
// gate when the ClusterQueue has quota for the whole group. While they wait, the job's
// condition Admitted says why, in Kueue's words.
//
// The labels, annotation and gate are those Kueue's pod webhook would add, so that a
// cluster whose Kueue runs without its pod webhook admits the job the same way.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/meta.h"
#include "star/core/status.h"
#include "star/kube/client.h"
#include "star/operator/reconciler/status_records.h"

namespace star::op {

inline constexpr char kKueueQueueLabel[] = "kueue.x-k8s.io/queue-name";
inline constexpr char kKueueManagedLabel[] = "kueue.x-k8s.io/managed";
inline constexpr char kKueuePodGroupLabel[] = "kueue.x-k8s.io/pod-group-name";
inline constexpr char kKueueGroupTotalCountAnnotation[] = "kueue.x-k8s.io/pod-group-total-count";
inline constexpr char kKueueAdmissionGate[] = "kueue.x-k8s.io/admission";
// The job's condition while it is queued by Kueue.
inline constexpr char kAdmittedCondition[] = "Admitted";

// The job's queue (its kueue.x-k8s.io/queue-name label); nullopt when it has none.
std::optional<std::string> KueueQueueOf(const nlohmann::json& job);
// The pod group (and Kueue Workload) name of the job: <name>-<first 8 of its uid>, so that a
// job made again under the same name is a new group; at most 63 characters.
std::string KueuePodGroupName(const nlohmann::json& job);
// Makes `pods` (all of the job's pods) one Kueue pod group when the job has a queue:
// the queue and managed labels, the group label, the total-count annotation and the
// admission scheduling gate. Nothing changes for a job without a queue.
void ApplyKueuePodGroup(const nlohmann::json& job, std::vector<nlohmann::json>* pods);

// Whether `pod` still waits for Kueue (carries the admission gate).
bool GatedByKueue(const nlohmann::json& pod);

// What the Admitted condition says.
struct Admission {
  bool admitted = false;
  std::string reason;   // Admitted | WaitingForQuota | QueueMissing | Inadmissible | WaitingForWorkload
  std::string message;  // Kueue's own words where its Workload has them
};

// The job's admission, from its observed pods and its Workload (as read: NotFound when
// Kueue has made none yet). nullopt when the job has no queue or no pod yet. Admitted
// once no pod is gated; else the Workload's QuotaReserved (or Admitted) condition says why.
std::optional<Admission> AdmissionOf(const nlohmann::json& job, const std::map<std::string, nlohmann::json>& pods,
                                     const StatusOr<nlohmann::json>& workload);

// While a job queued by Kueue waits, how often its Admitted condition is read again from
// its Workload (Kueue's changes to a Workload do not reach the operator otherwise).
inline constexpr std::chrono::milliseconds kAdmissionRecheck{10000};

// Keeps the Admitted condition of a job queued by Kueue: computed from its pods and its
// Workload (read with `client` only while a pod is gated), written through `records` when
// it changed, and set in `*job`'s status in memory so that later status writes keep it.
// Returns when to look again: kAdmissionRecheck while a pod is gated, else 0 (never). A
// failed Workload read becomes the condition's message; the status write's error is
// returned.
[[nodiscard]] StatusOr<std::chrono::milliseconds> SyncAdmittedCondition(
    kube::Client* client, StatusRecords* records, nlohmann::json* job,
    const std::map<std::string, nlohmann::json>& pods);

}  // namespace star::op
