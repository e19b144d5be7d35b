// What a TrainingJob should own on Kubernetes, and what phase it is in: pure functions
// from the job (and the pods observed) to desired objects and decisions. No I/O, no
// clock (time comes in as parameters). The reconciler applies what these compute.
//
// Objects owned by job <name> in namespace <ns> (every one with an ownerReference to the
// job, controller=true, so deleting the job deletes them):
//   Pods     <name>-worker-<i> (i in [0, workers.replicas)) and <name>-ps-<i>
//            labels star.dev/job=<name>, star.dev/role=worker|ps, star.dev/rank=<i>
//   Service  <name> (headless: clusterIP None, selector star.dev/job=<name>), so that
//            <name>-worker-0.<name>.<ns>.svc resolves (pods set hostname and subdomain)
//   Secret   <name>-token (data.token: the job's report token)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/meta.h"
#include "star/core/api/node_allocation.h"
#include "star/core/api/training_job.h"
#include "star/core/status.h"

namespace star::op {

inline constexpr char kJobLabel[] = "star.dev/job";
inline constexpr char kRoleLabel[] = "star.dev/role";
inline constexpr char kRankLabel[] = "star.dev/rank";
// Held by every TrainingJob the operator saw: removed once the job's entries are gone
// from every NodeAllocation.
inline constexpr char kFinalizer[] = "star.dev/node-allocations";
// On the TrainingJob: how many times its pods were restarted (decimal).
inline constexpr char kRestartsAnnotation[] = "star.dev/restarts";
// On every pod: PodTemplateHash of the spec it was made from. A pod whose hash differs
// from the job's current one (the template or a replica count changed) is outdated.
inline constexpr char kPodTemplateHashAnnotation[] = "star.dev/pod-template-hash";
inline constexpr int kStorePort = 29500;
// MASTER_PORT of worker pods (torch.distributed's rendezvous on worker pod 0); not
// kStorePort, which STAR's own store holds there.
inline constexpr int kMasterPort = 29501;
// The port of a worker's Prometheus endpoint (STAR_METRICS_ADDRESS 0.0.0.0:9400 and the
// container port named star-metrics, which the chart's PodMonitor scrapes).
inline constexpr int kWorkerMetricsPort = 9400;
inline constexpr char kWorkerMetricsPortName[] = "star-metrics";

std::string WorkerPodName(const std::string& job, int rank);
std::string PsPodName(const std::string& job, int index);
std::string TokenSecretName(const std::string& job);
// Whether `pod` is named like one of `job`'s pods (<job>-worker-<digits>, <job>-ps-<digits>).
bool IsJobPodName(const std::string& job, const std::string& pod);
// The job a pod name belongs to (<job>-worker-<digits> or <job>-ps-<digits>); nullopt for
// other names.
std::optional<std::string> JobOfPodName(const std::string& pod);
// The rank of a worker pod (its star.dev/rank label); -1 for a parameter server, a pod
// that is not STAR's, or a label that is not a rank.
int WorkerRank(const nlohmann::json& pod);

struct PodEnvOptions {
  std::string report_url;  // STAR_CONTROLLER_URL; the operator's --report-url
  // STAR_REPORT_CA: the PEM text of the CA that verifies an https report_url (the
  // operator's --report-ca-file). Default "" = not set.
  std::string report_ca{};
};

// The ownerReference every owned object carries (needs metadata.uid of `job`).
nlohmann::json OwnerReference(const nlohmann::json& job);
// Whether `object`'s controller ownerReference is the TrainingJob (star.dev) with uid
// `job_uid` (non-empty). A label star.dev/job alone makes nothing a job's own: anyone who
// may create pods in the namespace can set it.
bool IsControlledBy(const nlohmann::json& object, const std::string& job_uid);
// Whether `pod` is a pod STAR made: its controller ownerReference is a TrainingJob
// (star.dev) and its star.dev/job label names that job.
bool IsStarPod(const nlohmann::json& pod);

// Every pod the job should have, workers first (rank order), then parameter servers.
// Each is the role's template (metadata labels/annotations kept) with the labels above,
// the owner reference, hostname = pod name, subdomain = job name, restartPolicy Never
// unless the template sets one, and in every container the env STAR_RANK,
// STAR_WORLD_SIZE, STAR_PARAMETER_SERVERS, STAR_STORE_URL, STAR_CONTROLLER_URL, STAR_JOB,
// STAR_JOB_TOKEN (secretKeyRef <job>-token/token), STAR_LISTEN_HOST (fieldRef
// status.podIP), STAR_REPORT_CA when options.report_ca is set, and STAR_HOST_STORE=1 on
// the store host (worker 0, or PS 0 when there are parameter servers). Workers also get
// STAR_GLOBAL_BATCH, STAR_AMP_DTYPE, STAR_MAX_ITERATIONS (when set) and torchrun's RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR (worker pod 0 in the
// Service) and MASTER_PORT (kMasterPort). With procsPerPod P > 1, worker pod i is
// torchrun's node i with P processes: STAR_RANK is left out (each process's rank is
// RANK = i * P + LOCAL_RANK, set by its launcher) and STAR_WORLD_SIZE = WORLD_SIZE =
// replicas * P. Existing env entries of those names are replaced. A worker's first container also serves its
// metrics: STAR_METRICS_ADDRESS=0.0.0.0:kWorkerMetricsPort (unless the template sets it)
// and a container port named kWorkerMetricsPortName (unless it has one of that name).
// InvalidArgument naming the field when a role has no template.spec.containers.
StatusOr<std::vector<nlohmann::json>> DesiredPods(const nlohmann::json& job,
                                                  const api::TrainingJobSpec& spec,
                                                  const PodEnvOptions& options);
nlohmann::json DesiredService(const nlohmann::json& job);
// A hash (16 hex digits) of what the pods are made from: architecture, workers and
// parameterServers (replicas, procsPerPod and templates). Training settings are not in it:
// they reach the pods' env when the pods are created, and a change waits for the next
// gang start.
std::string PodTemplateHash(const api::TrainingJobSpec& spec);
// `token` is stored base64-encoded under data.token.
nlohmann::json DesiredSecret(const nlohmann::json& job, const std::string& token);
// data.token of a Secret, decoded; nullopt when absent or malformed.
std::optional<std::string> SecretToken(const nlohmann::json& secret);

// ---- phase ----

// What the TrainingJob reconciler should do with the job's pods (the gang).
enum class JobPodsAction {
  kNone,           // leave them
  kCreateMissing,  // create every desired pod that does not exist
  kDeleteAll,      // delete every pod of the job (restart, or failure)
};

struct PhaseInput {
  api::JobPhase current = api::JobPhase::kPending;  // status.phase now
  std::vector<std::string> desired;                 // names, as DesiredPods
  // Observed pods of the job by name (pods with a deletionTimestamp included).
  std::map<std::string, nlohmann::json> observed;
  // An observed pod was made from another spec (its kPodTemplateHashAnnotation differs).
  bool outdated = false;
  int restarts = 0;        // the restarts annotation
  int max_restarts = 3;    // spec.runPolicy.backoffLimit, else --max-restarts
  bool backoff_elapsed = true;  // the restart backoff since the last restart has passed
  bool suspended = false;       // spec.suspend
  // spec.runPolicy.activeDeadlineSeconds has passed since status.startTime: the message
  // says by how much; empty = not exceeded.
  std::string deadline_exceeded;
};

struct PhaseDecision {
  api::JobPhase phase = api::JobPhase::kPending;
  std::string reason;   // CamelCase
  std::string message;  // names the pod and what happened
  JobPodsAction action = JobPodsAction::kNone;
  int restarts = 0;     // the annotation after this decision
};

// Level-based phase rules:
//   terminal phases (Succeeded, Failed) stay, with kDeleteAll while a pod is left
//     running after a failure;
//   a deadline exceeded -> Failed (DeadlineExceeded, kDeleteAll);
//   suspended -> Suspended (JobSuspended), kDeleteAll while a pod is left; resumed, the
//     rules below create the pods again;
//   outdated pods while not Restarting -> Restarting (SpecChanged, kDeleteAll; not counted
//     as a restart): the gang comes back with the new spec;
//   a pod Failed while not Restarting: restarts < max -> Restarting (restarts + 1,
//     kDeleteAll), else Failed (BackoffLimitExceeded, kDeleteAll);
//   Restarting: kDeleteAll until no pod is left, then once the backoff has elapsed
//     Created with kCreateMissing;
//   every worker Succeeded -> Succeeded;
//   a pod missing -> Created, kCreateMissing;
//   every pod Running -> Running; otherwise Created (pods pending).
PhaseDecision DecidePhase(const PhaseInput& in);

// Sets condition `type` (keeping lastTransitionTime when its status does not change).
void SetCondition(std::vector<api::Condition>* conditions, const std::string& type,
                  bool status, const std::string& reason, const std::string& message,
                  const std::string& now_rfc3339, int64_t generation);
// The conditions for a phase: the phase's own type True; Running, Restarting and
// Suspended False when not in them; Created True once pods were created.
void SetPhaseConditions(std::vector<api::Condition>* conditions, const PhaseDecision& d,
                        const std::string& now_rfc3339, int64_t generation);

// Restart backoff: base * 2^(restarts-1), capped at 5 minutes; 0 for restarts <= 0.
int64_t RestartBackoffMillis(int restarts, int64_t base_millis);

// ---- NodeAllocation ----

// The job's pods that are bound to a node (spec.nodeName) and not finished, by node:
// cpu.quotaMillicores = the sum of the containers' CPU limits (0 = unlimited when any
// container has none), guaranteed when every container's CPU request equals its limit.
std::map<std::string, std::vector<api::PodAllocation>> JobAllocationsByNode(
    const std::vector<nlohmann::json>& pods);

// `current` with namespace `ns`'s entries of `job` (by IsJobPodName) replaced by `mine`
// (sorted by name for a stable order). Entries of other jobs are kept as they are.
api::NodeAllocationSpec MergeJobAllocations(const api::NodeAllocationSpec& current,
                                            const std::string& ns, const std::string& job,
                                            const std::vector<api::PodAllocation>& mine);

}  // namespace star::op
