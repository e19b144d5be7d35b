#include "star/operator/reconciler/job_objects.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>

#include "star/core/api/json_reader.h"
#include "star/core/api/pod_bandwidth.h"
#include "star/core/api/training_job.h"
#include "star/operator/reconciler/pod_group.h"
#include "star/operator/reconciler/queueing.h"

namespace star::op {
namespace {

using nlohmann::json;

std::string Name(const json& job) { return job["metadata"].value("name", ""); }
std::string Namespace(const json& job) {
  return job["metadata"].value("namespace", std::string("default"));
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string PodPhase(const json& pod) {
  auto st = pod.find("status");
  if (st == pod.end() || !st->is_object()) return "Pending";
  return st->value("phase", std::string("Pending"));
}

json EnvValue(const std::string& name, const std::string& value) {
  return {{"name", name}, {"value", value}};
}

// Replaces (or appends) the entries of `add` in a container's env, by name.
void SetEnv(json* container, const std::vector<json>& add) {
  json env = container->value("env", json::array());
  if (!env.is_array()) env = json::array();
  std::set<std::string> names;
  for (const json& e : add) names.insert(e["name"].get<std::string>());
  json out = json::array();
  for (const json& e : env) {
    if (e.is_object() && e.contains("name") && e["name"].is_string() &&
        names.count(e["name"].get<std::string>())) {
      continue;
    }
    out.push_back(e);
  }
  for (const json& e : add) out.push_back(e);
  (*container)["env"] = std::move(out);
}

// A worker reports every 10 iterations or every this many seconds, whichever comes first:
// 0.5 s as in `star local`, so that a straggler's slow iterations reach the detector about
// as fast as it runs them (on the operator, 1 s took a 4x straggler 2.3-3.6 s to flag where
// 0.5 s took 2.3-2.9 s in local mode); above 512 pods every pods/1024 s, so that one job
// sends the report endpoint at most about 1024 reports a second.
std::string ReportSeconds(int pods) { return api::FormatNumber(std::max(0.5, pods / 1024.0)); }

// LibTorch and PyTorch start a thread per core of the node, and under a CPU limit the
// kernel throttles the extra threads: star-fmnist with 2 threads at a 400m limit took
// 0.55 s per iteration against 0.21 s with 1. A container with a CPU limit gets
// OMP_NUM_THREADS, its limit rounded up to whole cores, unless it sets the variable itself.
void SetThreadsForCpuLimit(json* container) {
  const json* limit = nullptr;
  if (container->contains("resources") && (*container)["resources"].contains("limits") &&
      (*container)["resources"]["limits"].contains("cpu")) {
    limit = &(*container)["resources"]["limits"]["cpu"];
  }
  if (limit == nullptr) return;
  const std::optional<int64_t> mc = api::ParseCpuMillicores(*limit);
  if (!mc || *mc <= 0) return;
  for (const json& e : container->value("env", json::array())) {
    if (e.is_object() && e.value("name", "") == "OMP_NUM_THREADS") return;
  }
  SetEnv(container, {EnvValue("OMP_NUM_THREADS", std::to_string((*mc + 999) / 1000))});
}

// Drops variable `name` from every container of `pod`.
void RemoveEnv(json* pod, const std::string& name) {
  for (json& c : (*pod)["spec"]["containers"]) {
    json kept = json::array();
    for (const json& e : c.value("env", json::array())) {
      if (!e.is_object() || e.value("name", "") != name) kept.push_back(e);
    }
    c["env"] = std::move(kept);
  }
}

// The training settings of the spec, one source for the script (STAR_GLOBAL_BATCH,
// STAR_MAX_ITERATIONS when set, STAR_AMP_DTYPE; for a pipeline STAR_PIPELINE_STAGES,
// STAR_MICRO_BATCHES and STAR_MAX_IN_FLIGHT when set: a process's stage is RANK modulo
// the stages).
std::vector<json> TrainingEnv(const api::TrainingJobSpec& spec) {
  std::vector<json> env = {
      EnvValue("STAR_GLOBAL_BATCH", std::to_string(spec.training.global_batch_size)),
      EnvValue("STAR_AMP_DTYPE", std::string(api::ToString(spec.mitigation.amp.dtype))),
  };
  if (spec.training.max_iterations) {
    env.push_back(EnvValue("STAR_MAX_ITERATIONS", std::to_string(*spec.training.max_iterations)));
  }
  for (const auto& [name, value] : api::PipelineEnv(spec.parallelism)) env.push_back(EnvValue(name, value));
  return env;
}

// torchrun's environment for worker pod `index`: the pod is torchrun's node NODE_RANK with
// LOCAL_WORLD_SIZE = procsPerPod processes; RANK and LOCAL_RANK are its first process's
// (a launcher of several processes sets them per process). MASTER_ADDR is worker pod 0's
// name in the job's headless Service.
std::vector<json> TorchrunEnv(const json& job, const api::TrainingJobSpec& spec, int index) {
  const int procs = spec.workers.procs_per_pod;
  const std::string master = WorkerPodName(Name(job), 0) + "." + Name(job) + "." + Namespace(job) + ".svc";
  return {
      EnvValue("RANK", std::to_string(index * procs)),
      EnvValue("WORLD_SIZE", std::to_string(api::WorldSize(spec))),
      EnvValue("LOCAL_RANK", "0"),
      EnvValue("LOCAL_WORLD_SIZE", std::to_string(procs)),
      EnvValue("NODE_RANK", std::to_string(index)),
      EnvValue("MASTER_ADDR", master),
      EnvValue("MASTER_PORT", std::to_string(kMasterPort)),
  };
}

StatusOr<json> RolePod(const json& job, const api::ReplicaSpec& role, const std::string& path,
                       const std::string& role_name, int rank, const std::string& pod_name,
                       const std::vector<json>& env) {
  if (!role.pod_template || !role.pod_template->contains("spec") ||
      !(*role.pod_template)["spec"].contains("containers")) {
    return Status::InvalidArgument(path + ".template.spec.containers: required to run pods");
  }
  const json& tmpl = *role.pod_template;
  json meta = tmpl.value("metadata", json::object());
  json pod_meta = json::object();
  pod_meta["name"] = pod_name;
  pod_meta["namespace"] = Namespace(job);
  json labels = meta.value("labels", json::object());
  labels[kJobLabel] = Name(job);
  labels[kRoleLabel] = role_name;
  labels[kRankLabel] = std::to_string(rank);
  pod_meta["labels"] = std::move(labels);
  if (meta.contains("annotations")) pod_meta["annotations"] = meta["annotations"];
  pod_meta["ownerReferences"] = json::array({OwnerReference(job)});

  json spec = tmpl["spec"];
  spec["hostname"] = pod_name;
  spec["subdomain"] = Name(job);
  if (!spec.contains("restartPolicy")) spec["restartPolicy"] = "Never";
  for (json& c : spec["containers"]) {
    SetEnv(&c, env);
    SetThreadsForCpuLimit(&c);
  }
  return json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", std::move(pod_meta)},
              {"spec", std::move(spec)}};
}

// A worker's first container serves its star_worker_* metrics on kWorkerMetricsPort, named
// for the PodMonitor; what the template already sets is kept.
void ServeWorkerMetrics(json& pod) {
  json& c = pod["spec"]["containers"][0];
  bool has_env = false, has_port = false;
  for (const json& e : c.value("env", json::array())) has_env |= e.value("name", "") == "STAR_METRICS_ADDRESS";
  for (const json& p : c.value("ports", json::array())) has_port |= p.value("name", "") == kWorkerMetricsPortName;
  if (!has_env) c["env"].push_back(EnvValue("STAR_METRICS_ADDRESS", "0.0.0.0:" + std::to_string(kWorkerMetricsPort)));
  if (!has_port) {
    c["ports"].push_back({{"name", kWorkerMetricsPortName}, {"containerPort", kWorkerMetricsPort}, {"protocol", "TCP"}});
  }
}

}  // namespace

std::string WorkerPodName(const std::string& job, int rank) {
  return job + "-worker-" + std::to_string(rank);
}
std::string PsPodName(const std::string& job, int index) {
  return job + "-ps-" + std::to_string(index);
}
std::string TokenSecretName(const std::string& job) { return job + "-token"; }

bool IsJobPodName(const std::string& job, const std::string& pod) {
  for (const std::string& prefix : {job + "-worker-", job + "-ps-"}) {
    if (pod.size() > prefix.size() && pod.compare(0, prefix.size(), prefix) == 0 &&
        AllDigits(pod.substr(prefix.size()))) {
      return true;
    }
  }
  return false;
}

std::optional<std::string> JobOfPodName(const std::string& pod) {
  for (const std::string role : {"-worker-", "-ps-"}) {
    const auto at = pod.rfind(role);
    if (at == std::string::npos || at == 0) continue;
    const std::string job = pod.substr(0, at);
    if (IsJobPodName(job, pod)) return job;
  }
  return std::nullopt;
}

int WorkerRank(const json& pod) {
  if (!pod.is_object() || !pod.contains("metadata")) return -1;
  const json labels = pod["metadata"].value("labels", json::object());
  if (!labels.is_object() || labels.value(kRoleLabel, "") != "worker") return -1;
  const json rank = labels.value(kRankLabel, json());
  if (!rank.is_string()) return -1;
  const std::string s = rank.get<std::string>();
  if (!AllDigits(s) || s.size() > 9) return -1;
  return std::stoi(s);
}

namespace {

// The controller ownerReference of `object` when it is a TrainingJob's, else nullptr.
const json* JobController(const json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) return nullptr;
  const json& meta = object["metadata"];
  if (!meta.contains("ownerReferences") || !meta["ownerReferences"].is_array()) return nullptr;
  for (const json& r : meta["ownerReferences"]) {
    if (!r.is_object() || r.value("controller", false) != true) continue;
    const std::string api_version = r.value("apiVersion", "");
    if (r.value("kind", "") != "TrainingJob" || api_version.rfind("star.dev/", 0) != 0) return nullptr;
    return &r;
  }
  return nullptr;
}

}  // namespace

bool IsControlledBy(const json& object, const std::string& job_uid) {
  const json* owner = JobController(object);
  return owner != nullptr && !job_uid.empty() && owner->value("uid", "") == job_uid;
}

bool IsStarPod(const json& pod) {
  const json* owner = JobController(pod);
  if (owner == nullptr) return false;
  const json labels = pod["metadata"].value("labels", json::object());
  return labels.contains(kJobLabel) && labels[kJobLabel] == owner->value("name", "");
}

json OwnerReference(const json& job) {
  return {{"apiVersion", job.value("apiVersion", std::string("star.dev/v1alpha1"))},
          {"kind", "TrainingJob"},
          {"name", Name(job)},
          {"uid", job["metadata"].value("uid", "")},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

StatusOr<std::vector<json>> DesiredPods(const json& job, const api::TrainingJobSpec& spec,
                                        const PodEnvOptions& options) {
  const std::string name = Name(job), ns = Namespace(job);
  const int workers = spec.workers.replicas;  // pods
  const int world = api::WorldSize(spec);      // worker processes
  const int ps = spec.parameter_servers ? spec.parameter_servers->replicas : 0;
  const std::string store_host = ps > 0 ? PsPodName(name, 0) : WorkerPodName(name, 0);
  const std::string store_url =
      "http://" + store_host + "." + name + "." + ns + ".svc:" + std::to_string(kStorePort);
  auto common = [&](int rank) {
    std::vector<json> env = {
        EnvValue("STAR_RANK", std::to_string(rank)),
        EnvValue("STAR_WORLD_SIZE", std::to_string(world)),
        EnvValue("STAR_PARAMETER_SERVERS", std::to_string(ps)),
        EnvValue("STAR_STORE_URL", store_url),
        EnvValue("STAR_CONTROLLER_URL", options.report_url),
        EnvValue("STAR_REPORT_SECONDS", ReportSeconds(world + ps)),
        EnvValue("STAR_JOB", ns + "/" + name),
        {{"name", "STAR_JOB_TOKEN"},
         {"valueFrom", {{"secretKeyRef", {{"name", TokenSecretName(name)}, {"key", "token"}}}}}},
        {{"name", "STAR_LISTEN_HOST"},
         {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}},
        {{"name", "STAR_NODE_NAME"},  // the metrics' node label
         {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}},
    };
    if (!options.report_ca.empty()) env.push_back(EnvValue("STAR_REPORT_CA", options.report_ca));
    return env;
  };
  const std::string hash = PodTemplateHash(spec);
  std::vector<json> pods;
  for (int i = 0; i < workers; ++i) {
    std::vector<json> env = common(i * spec.workers.procs_per_pod);
    if (ps == 0 && i == 0) env.push_back(EnvValue("STAR_HOST_STORE", "1"));
    for (std::vector<json> more : {TrainingEnv(spec), TorchrunEnv(job, spec, i)}) {
      env.insert(env.end(), more.begin(), more.end());
    }
    STAR_ASSIGN_OR_RETURN(json pod, RolePod(job, spec.workers, "spec.workers", "worker", i,
                                            WorkerPodName(name, i), env));
    // Several processes in a pod: each takes its rank from its launcher's RANK.
    if (spec.workers.procs_per_pod > 1) RemoveEnv(&pod, "STAR_RANK");
    ServeWorkerMetrics(pod);
    pods.push_back(std::move(pod));
  }
  for (int i = 0; i < ps; ++i) {
    std::vector<json> env = common(i);
    env.push_back(EnvValue("STAR_ROLE", "ps"));
    if (i == 0) env.push_back(EnvValue("STAR_HOST_STORE", "1"));
    STAR_ASSIGN_OR_RETURN(json pod, RolePod(job, *spec.parameter_servers, "spec.parameterServers",
                                            "ps", i, PsPodName(name, i), env));
    pods.push_back(std::move(pod));
  }
  for (json& pod : pods) pod["metadata"]["annotations"][kPodTemplateHashAnnotation] = hash;
  ApplySchedulerName(job, spec, &pods);
  ApplyKueuePodGroup(job, &pods);
  return pods;
}

std::string PodTemplateHash(const api::TrainingJobSpec& spec) {
  const json full = api::ToJson(spec);
  json parts = json::object();
  for (const char* k : {"architecture", "workers", "parameterServers"}) {
    if (full.contains(k)) parts[k] = full[k];
  }
  // One process per pod hashes as before procsPerPod existed: running pods stay current.
  if (parts["workers"].value("procsPerPod", 1) == 1) parts["workers"].erase("procsPerPod");
  // A pipeline's stages and schedule are the pods' too; a data-parallel job hashes as before.
  if (api::IsPipeline(spec.parallelism)) parts["parallelism"] = full["parallelism"];
  // FNV-1a, 64 bits, over the canonical dump (object keys sorted), from the offset basis
  // 1469598103934665603: not the standard 14695981039346656037 (one digit short) that
  // star::Fnv1a64 uses. Kept: running pods carry this value in their annotation, and a
  // different one would mark every pod of every running job outdated (a gang restart)
  // when the operator is upgraded.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : parts.dump()) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

json DesiredService(const json& job) {
  const std::string name = Name(job);
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata",
           {{"name", name},
            {"namespace", Namespace(job)},
            {"labels", {{kJobLabel, name}}},
            {"ownerReferences", json::array({OwnerReference(job)})}}},
          {"spec",
           {{"clusterIP", "None"},
            {"publishNotReadyAddresses", true},
            {"selector", {{kJobLabel, name}}},
            {"ports", json::array({{{"name", "store"}, {"port", kStorePort}}})}}}};
}

json DesiredSecret(const json& job, const std::string& token) {
  const std::string name = Name(job);
  std::string encoded(4 * ((token.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()),
                                reinterpret_cast<const unsigned char*>(token.data()),
                                static_cast<int>(token.size()));
  encoded.resize(static_cast<size_t>(n));
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"type", "Opaque"},
          {"metadata",
           {{"name", TokenSecretName(name)},
            {"namespace", Namespace(job)},
            {"labels", {{kJobLabel, name}}},
            {"ownerReferences", json::array({OwnerReference(job)})}}},
          {"data", {{"token", encoded}}}};
}

std::optional<std::string> SecretToken(const json& secret) {
  if (!secret.contains("data") || !secret["data"].is_object()) return std::nullopt;
  const json& data = secret["data"];
  if (!data.contains("token") || !data["token"].is_string()) return std::nullopt;
  const std::string in = data["token"].get<std::string>();
  if (in.empty() || in.size() % 4 != 0) return std::nullopt;
  std::string out(in.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  size_t pad = 0;
  if (in.back() == '=') ++pad;
  if (in.size() >= 2 && in[in.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  if (out.empty()) return std::nullopt;
  return out;
}

// ---------------------------------------------------------------- phase

namespace {

// The first observed pod (by name) that Failed, and its status message.
struct FailedPod {
  std::string name;  // empty: none failed
  std::string message;
  std::string Text() const { return "pod " + name + " failed" + (message.empty() ? "" : ": " + message); }
};

FailedPod FirstFailedPod(const std::map<std::string, json>& observed) {
  FailedPod failed;
  for (const auto& [name, pod] : observed) {
    if (PodPhase(pod) == "Failed" && failed.name.empty()) {
      failed.name = name;
      failed.message = pod.contains("status") ? pod["status"].value("message", "") : "";
    }
  }
  return failed;
}

// Whether an observed pod has not finished.
bool AnyLive(const std::map<std::string, json>& observed) {
  bool any_live = false;
  for (const auto& [name, pod] : observed) {
    const std::string phase = PodPhase(pod);
    if (phase != "Succeeded" && phase != "Failed") any_live = true;
  }
  return any_live;
}

// A pod failed while not Restarting: restart the gang, or fail once the restarts are used.
PhaseDecision DecideAfterFailure(const PhaseInput& in, const FailedPod& failed, PhaseDecision d) {
  using api::JobPhase;
  if (in.restarts < in.max_restarts) {
    d.phase = JobPhase::kRestarting;
    d.restarts = in.restarts + 1;
    d.reason = "PodFailed";
    d.message = failed.Text() + "; restart " + std::to_string(d.restarts) + " of " +
                std::to_string(in.max_restarts);
  } else {
    d.phase = JobPhase::kFailed;
    d.reason = "BackoffLimitExceeded";
    d.message = failed.Text() + "; " + std::to_string(in.restarts) + " restarts used (max " +
                std::to_string(in.max_restarts) + ")";
  }
  d.action = JobPodsAction::kDeleteAll;
  return d;
}

// Restarting: delete every pod, wait for the backoff, then create the pods again.
PhaseDecision DecideRestarting(const PhaseInput& in, PhaseDecision d) {
  d.reason = "PodFailed";
  if (!in.observed.empty()) {
    d.action = JobPodsAction::kDeleteAll;
    d.message = "deleting the job's pods before restart " + std::to_string(in.restarts);
    return d;
  }
  if (!in.backoff_elapsed) {
    d.message = "waiting for the restart backoff";
    return d;
  }
  d.phase = api::JobPhase::kCreated;
  d.reason = "PodsCreated";
  d.message = "restart " + std::to_string(in.restarts) + ": pods created";
  d.action = JobPodsAction::kCreateMissing;
  return d;
}

// How the desired pods stand among the observed ones.
struct DesiredPodCounts {
  int workers = 0;
  int workers_succeeded = 0;
  int missing = 0;
  int running = 0;
};

DesiredPodCounts CountDesiredPods(const PhaseInput& in) {
  DesiredPodCounts c;
  for (const std::string& name : in.desired) {
    const bool worker = name.find("-worker-") != std::string::npos;
    c.workers += worker;
    auto it = in.observed.find(name);
    if (it == in.observed.end()) {
      ++c.missing;
      continue;
    }
    const std::string phase = PodPhase(it->second);
    if (worker && phase == "Succeeded") ++c.workers_succeeded;
    if (phase == "Running") ++c.running;
  }
  return c;
}

// No failure, change or restart pending: the phase follows the desired pods.
PhaseDecision DecideFromPods(const PhaseInput& in, PhaseDecision d) {
  using api::JobPhase;
  const DesiredPodCounts c = CountDesiredPods(in);
  if (c.workers > 0 && c.workers_succeeded == c.workers) {
    d.phase = JobPhase::kSucceeded;
    d.reason = "WorkersSucceeded";
    d.message = "every worker succeeded";
    return d;
  }
  if (c.missing > 0) {
    d.phase = JobPhase::kCreated;
    d.reason = "PodsCreated";
    d.message = std::to_string(in.desired.size()) + " pods created";
    d.action = JobPodsAction::kCreateMissing;
    return d;
  }
  if (c.running == static_cast<int>(in.desired.size())) {
    d.phase = JobPhase::kRunning;
    d.reason = "AllPodsRunning";
    d.message = std::to_string(c.running) + " pods running";
    return d;
  }
  d.phase = JobPhase::kCreated;
  d.reason = "PodsCreated";
  d.message = std::to_string(c.running) + " of " + std::to_string(in.desired.size()) +
              " pods running";
  return d;
}

}  // namespace

PhaseDecision DecidePhase(const PhaseInput& in) {
  PhaseDecision d;
  d.phase = in.current;
  d.restarts = in.restarts;
  using api::JobPhase;

  const FailedPod failed = FirstFailedPod(in.observed);
  if (in.current == JobPhase::kSucceeded) {
    d.reason = "WorkersSucceeded";
    d.message = "every worker succeeded";
    return d;
  }
  if (in.current == JobPhase::kFailed) {
    d.reason = "Failed";
    d.action = AnyLive(in.observed) ? JobPodsAction::kDeleteAll : JobPodsAction::kNone;
    return d;
  }
  if (!in.deadline_exceeded.empty()) {
    d.phase = JobPhase::kFailed;
    d.reason = "DeadlineExceeded";
    d.message = in.deadline_exceeded;
    d.action = JobPodsAction::kDeleteAll;
    return d;
  }
  if (in.suspended) {
    d.phase = JobPhase::kSuspended;
    d.reason = "JobSuspended";
    d.message = in.observed.empty() ? "spec.suspend is true: the job has no pods"
                                    : "spec.suspend is true: deleting the job's pods";
    d.action = in.observed.empty() ? JobPodsAction::kNone : JobPodsAction::kDeleteAll;
    return d;
  }
  if (!failed.name.empty() && in.current != JobPhase::kRestarting) return DecideAfterFailure(in, failed, d);
  if (in.outdated && in.current != JobPhase::kRestarting) {
    d.phase = JobPhase::kRestarting;
    d.reason = "SpecChanged";
    d.message = "the pods' template or replicas changed: the gang restarts with the new spec";
    d.action = JobPodsAction::kDeleteAll;
    return d;
  }
  if (in.current == JobPhase::kRestarting) return DecideRestarting(in, d);
  return DecideFromPods(in, d);
}

void SetCondition(std::vector<api::Condition>* conditions, const std::string& type, bool status,
                  const std::string& reason, const std::string& message,
                  const std::string& now_rfc3339, int64_t generation) {
  const std::string s = status ? "True" : "False";
  auto it = std::find_if(conditions->begin(), conditions->end(),
                         [&](const api::Condition& c) { return c.type == type; });
  if (it == conditions->end()) {
    conditions->push_back({type, s, reason, message, now_rfc3339, generation});
    return;
  }
  if (it->status != s) it->last_transition_time = now_rfc3339;
  it->status = s;
  it->reason = reason;
  it->message = message;
  it->observed_generation = generation;
}

void SetPhaseConditions(std::vector<api::Condition>* conditions, const PhaseDecision& d,
                        const std::string& now, int64_t generation) {
  using api::JobPhase;
  const bool created = d.phase != JobPhase::kPending && d.phase != JobPhase::kSuspended;
  auto has = [&](const char* type) {
    return std::any_of(conditions->begin(), conditions->end(),
                       [&](const api::Condition& c) { return c.type == type; });
  };
  if (created && !has("Created")) {
    SetCondition(conditions, "Created", true, "PodsCreated", "the job's pods were created", now,
                 generation);
  }
  auto set = [&](const char* type, JobPhase phase) {
    const bool on = d.phase == phase;
    if (on) {
      SetCondition(conditions, type, true, d.reason, d.message, now, generation);
    } else if (has(type)) {
      SetCondition(conditions, type, false, d.reason, "", now, generation);
    }
  };
  set("Running", JobPhase::kRunning);
  set("Restarting", JobPhase::kRestarting);
  set("Succeeded", JobPhase::kSucceeded);
  set("Failed", JobPhase::kFailed);
  set("Suspended", JobPhase::kSuspended);
}

int64_t RestartBackoffMillis(int restarts, int64_t base_millis) {
  if (restarts <= 0) return 0;
  constexpr int64_t kCap = 5 * 60 * 1000;
  int64_t d = base_millis;
  for (int i = 1; i < restarts && d < kCap; ++i) d *= 2;
  return std::min(d, kCap);
}

// ---------------------------------------------------------------- NodeAllocation

std::map<std::string, std::vector<api::PodAllocation>> JobAllocationsByNode(
    const std::vector<json>& pods) {
  std::map<std::string, std::vector<api::PodAllocation>> out;
  for (const json& pod : pods) {
    const json& spec = pod.value("spec", json::object());
    const std::string node = spec.value("nodeName", "");
    const std::string phase = PodPhase(pod);
    if (node.empty() || phase == "Succeeded" || phase == "Failed") continue;
    if (pod["metadata"].contains("deletionTimestamp")) continue;
    api::PodAllocation a;
    a.namespace_ = pod["metadata"].value("namespace", "default");
    a.name = pod["metadata"].value("name", "");
    a.uid = pod["metadata"].value("uid", "");
    if (a.uid.empty()) continue;
    int64_t quota = 0;
    bool unlimited = false, guaranteed = true;
    for (const json& c : spec.value("containers", json::array())) {
      const json res = c.value("resources", json::object());
      const json limits = res.value("limits", json::object());
      const json requests = res.value("requests", json::object());
      std::optional<int64_t> limit, request;
      if (limits.contains("cpu")) limit = api::ParseCpuMillicores(limits["cpu"]);
      // Kubernetes defaults a missing request to the limit.
      request = requests.contains("cpu") ? api::ParseCpuMillicores(requests["cpu"]) : limit;
      if (!limit) {
        unlimited = true;
        guaranteed = false;
      } else {
        quota += *limit;
        if (!request || *request != *limit) guaranteed = false;
      }
    }
    a.cpu.quota_millicores = unlimited ? 0 : quota;
    a.guaranteed = guaranteed;
    // The template's annotations were validated; a pod annotated since gets none.
    auto net = api::PodBandwidth(pod["metadata"].value("annotations", json()), "metadata.annotations");
    if (net.ok()) a.network = *net;
    out[node].push_back(std::move(a));
  }
  return out;
}

api::NodeAllocationSpec MergeJobAllocations(const api::NodeAllocationSpec& current,
                                            const std::string& ns, const std::string& job,
                                            const std::vector<api::PodAllocation>& mine) {
  api::NodeAllocationSpec out;
  for (const api::PodAllocation& p : current.pods) {
    if (p.namespace_ == ns && IsJobPodName(job, p.name)) continue;
    out.pods.push_back(p);
  }
  std::vector<api::PodAllocation> sorted = mine;
  std::sort(sorted.begin(), sorted.end(),
            [](const api::PodAllocation& a, const api::PodAllocation& b) { return a.name < b.name; });
  for (api::PodAllocation& p : sorted) out.pods.push_back(std::move(p));
  return out;
}

}  // namespace star::op
