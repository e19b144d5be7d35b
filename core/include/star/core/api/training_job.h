// TrainingJob (group star.dev, version v1alpha1, namespaced, short name tj): a
// data-parallel training job whose stragglers STAR mitigates. Spec is the desired
// state written by the user; status is what the operator observed and decided.
//
// Wire form: the Kubernetes object, camelCase, e.g.
//   {"apiVersion":"star.dev/v1alpha1","kind":"TrainingJob",
//    "metadata":{"name":"fmnist","namespace":"default"},
//    "spec":{"architecture":"AllReduce",
//            "workers":{"replicas":4,"template":{...PodTemplateSpec...}},
//            "training":{"globalBatchSize":256,"targetAccuracy":0.88},
//            "synchronization":{"policy":"Auto"}, "mitigation":{...}},
//    "status":{...}}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/meta.h"
#include "star/core/api/parallelism.h"
#include "star/core/api/pipeline_status.h"
#include "star/core/api/types.h"
#include "star/core/status.h"

namespace star::api {

inline constexpr std::string_view kTrainingJobKind = "TrainingJob";

// Upper bound of spec.training.globalBatchSize, spec.mitigation.batchAdaptation.minLocalBatch
// and status.workers[].batch (2^31 - 1), as the CRD states it.
inline constexpr int64_t kMaxBatchSize = 2147483647;
// Upper bound of spec.mitigation.detection.threshold: no rule flags anyone above it.
inline constexpr double kMaxDetectionThreshold = 1000;
// Upper bound of spec.workers.replicas, spec.parameterServers.replicas and
// spec.synchronization.minK, and of the lists indexed by rank in status (groups, each
// group, stragglers, workers). The operator builds every pod of a job in memory at once
// and keeps per-worker state in its control loop: 1024 pods of a 64 KiB template are
// 64 MiB, which a 512 MiB operator holds beside its caches.
inline constexpr int kMaxReplicas = 1024;
// Upper bound of a pod template's size as compact JSON (spec.workers.template,
// spec.parameterServers.template), which keeps the 64 MiB above true. The API server
// would take templates up to its object size limit (about 1.5 MiB); the codec refuses
// larger ones, so such a job fails with a condition naming the field.
inline constexpr size_t kMaxPodTemplateBytes = 64 * 1024;
// Upper bound of spec.mitigation.detection.window: the detector keeps `window`
// iterations per worker, so kMaxReplicas * kMaxDetectionWindow samples per job.
inline constexpr int kMaxDetectionWindow = 1000;
// Upper bound of spec.workers.procsPerPod: processes (GPUs) in one worker pod.
inline constexpr int kMaxProcsPerPod = 64;
// Upper bound of spec.runPolicy.backoffLimit.
inline constexpr int kMaxBackoffLimit = 1000;
// Upper bound of spec.runPolicy.activeDeadlineSeconds and ttlSecondsAfterFinished (int32,
// as batch/v1 Job has them).
inline constexpr int64_t kMaxRunPolicySeconds = 2147483647;
// Upper bound of spec.runPolicy.schedulerName's length (a DNS-1123 subdomain).
inline constexpr size_t kMaxSchedulerNameLength = 253;

// spec.synchronization.policy. Wire: "Auto", "SSGD", "ASGD", "FixedK", "Groups".
enum class SyncPolicy { kAuto, kSsgd, kAsgd, kFixedK, kGroups };
std::string_view ToString(SyncPolicy p);
std::optional<SyncPolicy> ParseSyncPolicy(std::string_view s);

// spec.synchronization.selector. Wire: "Heuristic", "ML".
enum class ModeSelector { kHeuristic, kMl };
std::string_view ToString(ModeSelector s);
std::optional<ModeSelector> ParseModeSelector(std::string_view s);

// spec.mitigation.detection.rule (ALGORITHMS.md section 1).
// Wire: "MAD", "RelativeScore", "STAR", "ChangePoint".
enum class DetectionRule { kMad, kRelativeScore, kStar, kChangePoint };
std::string_view ToString(DetectionRule r);
std::optional<DetectionRule> ParseDetectionRule(std::string_view s);

// spec.mitigation.amp.dtype. Wire: "bfloat16", "float16". The codec refuses float16:
// fp16 needs a loss scale, and a scale applied on the contended workers only would mix
// scaled and unscaled gradients in one all-reduce.
enum class AmpDtype { kBfloat16, kFloat16 };
std::string_view ToString(AmpDtype d);
std::optional<AmpDtype> ParseAmpDtype(std::string_view s);

// spec.mitigation.mode. Wire: "Mitigate", "Observe". Observe detects and reports
// stragglers (status, Events, metrics) and changes nothing in training or on nodes.
enum class MitigationMode { kMitigate, kObserve };
std::string_view ToString(MitigationMode m);
std::optional<MitigationMode> ParseMitigationMode(std::string_view s);

// status.phase. Wire: "Pending", "Created", "Running", "Restarting", "Succeeded", "Failed",
// "Suspended".
enum class JobPhase { kPending, kCreated, kRunning, kRestarting, kSucceeded, kFailed, kSuspended };
std::string_view ToString(JobPhase p);
std::optional<JobPhase> ParseJobPhase(std::string_view s);

// ---- spec ----

// A role's pods: how many and from which PodTemplateSpec.
struct ReplicaSpec {
  int replicas = 1;  // required on the wire; <= kMaxReplicas
  // The PodTemplateSpec, kept verbatim (unknown fields allowed). Absent = nullopt.
  // When present it is an object, and template.spec.containers, when present, is a
  // non-empty array of container objects each with a string "name" (see FirstContainer),
  // and its compact JSON is at most kMaxPodTemplateBytes.
  std::optional<nlohmann::json> pod_template;  // wire: "template"
  // Processes per pod, each a worker with a rank of its own (torchrun's nproc-per-node;
  // one per GPU). In [1, kMaxProcsPerPod], at most the first container's nvidia.com/gpu
  // limit when it has one; workers only (parameter servers run one process per pod).
  int procs_per_pod = 1;  // wire: "procsPerPod"

  friend bool operator==(const ReplicaSpec&, const ReplicaSpec&) = default;
};

struct TrainingSpec {
  int64_t global_batch_size = 0;  // required; in [workers.replicas, kMaxBatchSize]
  // Optional, in (0, 1]: the test accuracy whose time is the job's TTA. Without it the job
  // runs to maxIterations or until its workers exit, and reports no TTA.
  std::optional<double> target_accuracy;
  std::optional<int64_t> max_iterations;  // in [1, kMaxJsonInteger] when set; unset = no limit

  friend bool operator==(const TrainingSpec&, const TrainingSpec&) = default;
};

struct SynchronizationSpec {
  SyncPolicy policy = SyncPolicy::kAuto;             // default Auto
  ModeSelector selector = ModeSelector::kHeuristic;  // default Heuristic
  // Lower bound on k; in [1, workers.replicas] when set (so <= kMaxReplicas).
  std::optional<int> min_k;

  friend bool operator==(const SynchronizationSpec&, const SynchronizationSpec&) = default;
};

struct DetectionSpec {
  DetectionRule rule = DetectionRule::kMad;  // default MAD
  int window = 20;  // iterations in the sliding window; in [3, kMaxDetectionWindow]
  std::optional<double> threshold;  // in (0, kMaxDetectionThreshold] when set; unset = default

  friend bool operator==(const DetectionSpec&, const DetectionSpec&) = default;
};

struct AmpSpec {
  bool enabled = true;                   // default true
  AmpDtype dtype = AmpDtype::kBfloat16;  // default bfloat16

  friend bool operator==(const AmpSpec&, const AmpSpec&) = default;
};

struct BatchAdaptationSpec {
  bool enabled = true;          // default true
  int64_t min_local_batch = 1;  // in [1, kMaxBatchSize], * workers.replicas <= globalBatchSize

  friend bool operator==(const BatchAdaptationSpec&, const BatchAdaptationSpec&) = default;
};

struct ResourceReallocationSpec {
  bool enabled = true;  // default true

  friend bool operator==(const ResourceReallocationSpec&,
                         const ResourceReallocationSpec&) = default;
};

struct MitigationSpec {
  MitigationMode mode = MitigationMode::kMitigate;  // default Mitigate
  DetectionSpec detection;
  AmpSpec amp;
  BatchAdaptationSpec batch_adaptation;            // wire: "batchAdaptation"
  ResourceReallocationSpec resource_reallocation;  // wire: "resourceReallocation"

  friend bool operator==(const MitigationSpec&, const MitigationSpec&) = default;
};

// How the job runs as a whole, as batch/v1 Job and Kubeflow name it.
struct RunPolicySpec {
  // Gang restarts before the job fails; unset = the operator's --max-restarts.
  std::optional<int> backoff_limit;  // wire "backoffLimit"; in [0, kMaxBackoffLimit]
  // Seconds from status.startTime (the start, or the last resume after a suspend) after
  // which the job fails (DeadlineExceeded) and its pods go.
  std::optional<int64_t> active_deadline_seconds;  // in [1, kMaxRunPolicySeconds]
  // Seconds after the job finished (Succeeded or Failed) after which it is deleted.
  std::optional<int64_t> ttl_seconds_after_finished;  // in [0, kMaxRunPolicySeconds]
  // The pods' schedulerName ("" = the cluster's default). "volcano" also makes a
  // PodGroup for the gang. A DNS-1123 subdomain.
  std::string scheduler_name;

  friend bool operator==(const RunPolicySpec&, const RunPolicySpec&) = default;
};

struct TrainingJobSpec {
  // No pods while true; a running job suspended loses its pods and keeps its status.
  // Kueue and other queues admit jobs through it.
  bool suspend = false;
  Architecture architecture = Architecture::kAllReduce;  // default AllReduce
  ReplicaSpec workers;                                   // required
  // Required (replicas >= 1) for ParameterServer; absent or replicas 0 for AllReduce.
  std::optional<ReplicaSpec> parameter_servers;  // wire: "parameterServers"
  TrainingSpec training;                         // required
  SynchronizationSpec synchronization;           // optional section: all defaults
  MitigationSpec mitigation;                     // optional section: all defaults
  RunPolicySpec run_policy;                      // wire "runPolicy"; optional, all unset
  ParallelismSpec parallelism;                   // optional section: one stage (parallelism.h)

  friend bool operator==(const TrainingJobSpec&, const TrainingJobSpec&) = default;
};

// The number of worker processes (ranks): workers.replicas * workers.procsPerPod.
int WorldSize(const TrainingJobSpec& spec);

// The spec the control loop acts on. Under mitigation.mode Observe nothing may change in
// training or on nodes: policy Auto becomes SSGD (a pinned policy is the user's own), and
// amp, batchAdaptation and resourceReallocation are off. A pipeline job (more than one
// stage) has them off too and never changes mode (the data-parallel modes and batches
// would split or unbalance its stages): under Mitigate its policy Auto stays (the loop
// adapts its schedule: control_loop.h) and any other becomes SSGD, its static schedule;
// under Observe it runs SSGD. Otherwise `spec` itself.
TrainingJobSpec MitigationsInForce(TrainingJobSpec spec);

// ---- status ----

struct StragglerStatus {
  int worker = 0;    // rank, in [0, kMaxReplicas)
  std::string node;  // node the worker runs on; may be empty (local mode)
  StragglerCause cause = StragglerCause::kCompute;
  StragglerKind kind = StragglerKind::kDynamic;
  double slowdown = 1;  // t_i / typical t; >= 0
  std::string since;    // RFC 3339 onset time; "" when unknown (omitted on the wire)

  friend bool operator==(const StragglerStatus&, const StragglerStatus&) = default;
};

struct WorkerStatus {
  int64_t batch = 1;  // current local batch, >= 1
  bool amp = false;   // mixed precision on

  friend bool operator==(const WorkerStatus&, const WorkerStatus&) = default;
};

struct TrainingJobStatus {
  JobPhase phase = JobPhase::kPending;  // default Pending
  std::vector<Condition> conditions;
  int64_t observed_generation = 0;  // >= 0
  // wire "syncMode": ssgd|fixed_k|groups|asgd; unset before the first decision.
  std::optional<SyncMode> sync_mode;
  std::optional<int> k;  // in [1, kMaxReplicas] when set
  // At most kMaxReplicas groups of at most kMaxReplicas ranks, each in [0, kMaxReplicas).
  std::vector<std::vector<int>> groups;
  std::vector<StragglerStatus> stragglers;  // at most kMaxReplicas
  std::vector<WorkerStatus> workers;        // indexed by rank; at most kMaxReplicas
  int64_t iteration = 0;                        // >= 0
  // The latest test accuracy the workers reported; in [0, 1] when set.
  std::optional<double> accuracy;
  // The job time at which accuracy first reached spec.training.targetAccuracy (the time
  // to accuracy); wire "ttaSeconds"; >= 0 when set, unset before.
  std::optional<double> tta_seconds;
  std::optional<double> estimated_tta_seconds;  // wire "estimatedTTASeconds"; >= 0 when set
  // The latest decision issued to the workers (with syncMode, k, groups, workers): its
  // epoch and the iteration it applies at (both >= 0; unset before the first). A
  // restarted controller resumes from them: workers ignore decisions not newer than one
  // they have.
  std::optional<int64_t> decision_epoch;               // wire "decisionEpoch"
  std::optional<int64_t> decision_apply_at_iteration;  // wire "decisionApplyAtIteration"
  // A pipeline job's schedule under the latest decision; unset = its static schedule.
  std::optional<PipelineScheduleStatus> pipeline;
  // RFC 3339: when the job's pods were last created from no pods (the first start, or a
  // resume; runPolicy.activeDeadlineSeconds counts from it), and when it Succeeded or
  // Failed (ttlSecondsAfterFinished counts from it). "" = not yet (omitted on the wire).
  std::string start_time;       // wire "startTime"
  std::string completion_time;  // wire "completionTime"

  friend bool operator==(const TrainingJobStatus&, const TrainingJobStatus&) = default;
};

struct TrainingJob {
  ObjectMeta metadata;
  TrainingJobSpec spec;
  std::optional<TrainingJobStatus> status;  // unset = no status yet (omitted on the wire)

  friend bool operator==(const TrainingJob&, const TrainingJob&) = default;
};

// ---- codecs ----
//
// Decoding validates every field and names the first offending one by its path
// ("spec.workers.replicas: must be >= 1, got 0"). Unknown fields are rejected
// everywhere in spec and status ("spec.trainig: unknown field") except inside pod
// templates. Defaults applied on decode when a field is absent:
//   spec.architecture AllReduce; spec.synchronization {policy Auto, selector Heuristic};
//   spec.mitigation.detection {rule MAD, window 20}; amp {enabled true, dtype bfloat16};
//   batchAdaptation {enabled true, minLocalBatch 1}; resourceReallocation {enabled true};
//   metadata.namespace "default"; status.phase Pending, counters 0, lists empty.
// ToJson writes defaults explicitly, so ToJson(FromJson(x)) == x for any document that
// spells out every defaulted field, and FromJson(ToJson(s)) == s for any valid struct.

// The whole object. apiVersion and kind, when present, must be "star.dev/v1alpha1" and
// "TrainingJob"; metadata (name required, a DNS-1123 label) and spec are required,
// status is optional. Other metadata fields are ignored (see ObjectMeta).
StatusOr<TrainingJob> TrainingJobFromJson(const nlohmann::json& j);
// Always writes apiVersion and kind; status only when set.
nlohmann::json ToJson(const TrainingJob& job);

// Decodes a spec and then applies Validate(spec, path).
StatusOr<TrainingJobSpec> TrainingJobSpecFromJson(const nlohmann::json& j,
                                                  const std::string& path = "spec");
nlohmann::json ToJson(const TrainingJobSpec& spec);

// Checks every rule on a spec built in code or decoded: single-field ranges (as
// documented on the fields) and the cross-field rules, with N = WorldSize(spec) <=
// kMaxReplicas: globalBatchSize >= N; minK <= N; minLocalBatch * N <= globalBatchSize; procsPerPod <= the first worker container's nvidia.com/gpu limit;
// amp.dtype bfloat16; ParameterServer needs parameterServers.replicas >= 1; AllReduce
// allows parameterServers only with replicas 0; policy ASGD needs ParameterServer;
// pod templates well-formed; spec.parallelism's rules (parallelism.h). `path` prefixes
// the field paths in errors.
[[nodiscard]] Status Validate(const TrainingJobSpec& spec, const std::string& path = "spec");

StatusOr<TrainingJobStatus> TrainingJobStatusFromJson(const nlohmann::json& j,
                                                      const std::string& path = "status");
// Writes phase, conditions, observedGeneration, groups, stragglers, workers and
// iteration always; syncMode, k, accuracy, ttaSeconds, estimatedTTASeconds,
// decisionEpoch, decisionApplyAtIteration and pipeline only when set.
nlohmann::json ToJson(const TrainingJobStatus& status);

// ---- pod template helpers ----

// The parts of a container STAR needs to run it (local mode) or reason about it.
struct ContainerSummary {
  std::string name;
  std::string image;                              // "" when not set
  std::vector<std::string> command;               // empty when not set
  std::vector<std::string> args;                  // empty when not set
  std::optional<int64_t> cpu_limit_millicores;    // resources.limits.cpu
  std::optional<int64_t> cpu_request_millicores;  // resources.requests.cpu
  std::optional<int64_t> gpus;                    // resources.limits["nvidia.com/gpu"]

  friend bool operator==(const ContainerSummary&, const ContainerSummary&) = default;
};

// Parses a Kubernetes CPU quantity into millicores, rounding up like Kubernetes:
// a JSON number (cores) or a string "<decimal>[n|u|m|k]" ("500m", "2", "0.25", "1k").
// nullopt when malformed or negative.
std::optional<int64_t> ParseCpuMillicores(const nlohmann::json& quantity);

// Checks a PodTemplateSpec (as documented on ReplicaSpec::pod_template) and summarizes
// its first container. Each container's image must be a string, command/args arrays of
// strings and resources.{limits,requests}.cpu valid CPU quantities, when present.
// nullopt when the template has no spec.containers. Errors name the path under `path`
// ("spec.workers.template.spec.containers[0].name: required field is missing").
StatusOr<std::optional<ContainerSummary>> FirstContainer(const nlohmann::json& pod_template,
                                                         const std::string& path = "template");

}  // namespace star::api
