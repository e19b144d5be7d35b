#include "star/operator/reconciler/training_job_reconciler.h"

#include "reconciler/helpers.h"
#include "reconciler/reallocator.h"
#include "star/operator/reconciler/pod_group.h"
#include "star/operator/reconciler/queueing.h"
#include "star/operator/reconciler/run_policy.h"
#include "star/kube/informer.h"
#include "star/kube/time.h"
#include "star/report/token.h"

namespace star::op {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

kube::ResourceRef Secrets() { return {"", "v1", "secrets", true, "Secret"}; }

std::string NamespaceOf(const json& object) { return object["metadata"].value("namespace", "default"); }
std::string NameOf(const json& object) { return object["metadata"]["name"].get<std::string>(); }

// The job an object labelled star.dev/job belongs to; nullopt when unlabelled.
std::optional<std::string> LabelledJob(const json& object) {
  const json labels = object["metadata"].value("labels", json::object());
  if (!labels.contains(kJobLabel) || !labels[kJobLabel].is_string()) return std::nullopt;
  return object["metadata"].value("namespace", "default") + "/" + labels[kJobLabel].get<std::string>();
}

// The node of each worker rank ("" unknown): worker pod i holds ranks [i * P, (i + 1) * P)
// for P processes per pod.
std::vector<std::string> WorkerNodes(const std::map<std::string, json>& observed, const api::ReplicaSpec& workers) {
  const int procs = workers.procs_per_pod;
  std::vector<std::string> nodes(static_cast<size_t>(workers.replicas * procs));
  for (const auto& [pod_name, pod] : observed) {
    const int index = WorkerRank(pod);
    if (index < 0 || index >= workers.replicas) continue;
    const std::string node = pod.value("spec", json::object()).value("nodeName", "");
    for (int p = 0; p < procs; ++p) nodes[static_cast<size_t>(index * procs + p)] = node;
  }
  return nodes;
}

// The message of an exceeded runPolicy.activeDeadlineSeconds ("" when not exceeded);
// `*wait` shrinks to the time left when it is sooner.
std::string DeadlineExceeded(const json& status, const api::RunPolicySpec& policy, milliseconds* wait) {
  if (!policy.active_deadline_seconds) return "";
  const auto left = TimeLeft(status.value("startTime", ""), *policy.active_deadline_seconds,
                             std::chrono::system_clock::now());
  if (!left) return "";
  if (left->count() > 0) {
    *wait = SoonerWait(*wait, *left + milliseconds(1));
    return "";
  }
  return "the job ran past spec.runPolicy.activeDeadlineSeconds (" +
         std::to_string(*policy.active_deadline_seconds) + " s since " + status.value("startTime", "") + ")";
}

int RestartsOf(const json& job) {
  const json annotations = job["metadata"].value("annotations", json::object());
  if (!annotations.contains(kRestartsAnnotation) || !annotations[kRestartsAnnotation].is_string()) return 0;
  try {
    return std::stoi(annotations[kRestartsAnnotation].get<std::string>());
  } catch (const std::exception&) {
    return 0;
  }
}

// Whether a live pod was made from another spec than `desired`.
bool Outdated(const std::map<std::string, json>& observed, const std::vector<json>& desired) {
  if (desired.empty()) return false;
  const json want = desired[0]["metadata"]["annotations"][kPodTemplateHashAnnotation];
  bool outdated = false;
  for (const auto& [pod_name, pod] : observed) {
    const json annotations = pod["metadata"].value("annotations", json::object());
    if (pod["metadata"].contains("deletionTimestamp") || !annotations.contains(kPodTemplateHashAnnotation)) continue;
    outdated |= annotations[kPodTemplateHashAnnotation] != want;
  }
  return outdated;
}

}  // namespace

StatusOr<std::unique_ptr<TrainingJobReconciler>> TrainingJobReconciler::Create(Manager* manager,
                                                                               TrainingJobOptions options,
                                                                               TrainingJobDeps deps) {
  if (manager == nullptr || deps.registry == nullptr || deps.records == nullptr || deps.events == nullptr ||
      deps.nodes == nullptr || deps.endpoint == nullptr) {
    return Status::InvalidArgument("manager/registry/records/events/nodes/endpoint: required");
  }
  if (options.max_restarts < 0) {
    return Status::InvalidArgument("max_restarts: must be >= 0, got " + std::to_string(options.max_restarts));
  }
  std::unique_ptr<TrainingJobReconciler> r(new TrainingJobReconciler(manager, options, deps));
  r->Watch();
  return r;
}

TrainingJobReconciler::TrainingJobReconciler(Manager* manager, TrainingJobOptions options, TrainingJobDeps deps)
    : manager_(manager),
      client_(manager->client()),
      options_(options),
      deps_(deps),
      reallocator_(std::make_unique<Reallocator>(manager, deps.registry, deps.events, deps.nodes)) {}

TrainingJobReconciler::~TrainingJobReconciler() = default;

bool TrainingJobReconciler::Owns(const std::string& key) { return !NodeAllocationReconciler::Owns(key); }

void TrainingJobReconciler::Watch() {
  Cache& cache = manager_->cache();
  cache.AddHandler(Kind::kTrainingJob, [this](const std::string& type, const json& job) { OnJob(type, job); });
  cache.AddHandler(Kind::kPod, [this](const std::string& type, const json& pod) { OnPod(type, pod); });
  // A deleted Service is made again.
  cache.AddHandler(Kind::kService, [this](const std::string& type, const json& service) {
    if (type != "DELETED") return;
    if (auto key = LabelledJob(service)) manager_->Enqueue(*key);
  });
  manager_->AddController("trainingjob", Owns, this);
}

void TrainingJobReconciler::OnJob(const std::string& type, const json& job) {
  const std::string key = kube::KeyOf(job);
  bool first = false;
  {
    std::lock_guard lock(mu_);
    if (type == "DELETED") {
      seen_.erase(key);
    } else {
      first = seen_.insert(key).second;
    }
  }
  // The plan lives in the NodeAllocations: read back once per job (a restarted
  // operator), then kept by the Reallocator. The job's annotations are never read for it.
  if (type == "DELETED" || job["metadata"].contains("deletionTimestamp")) {
    deps_.nodes->SetPlan(key, {});
  } else if (first) {
    deps_.nodes->SetPlan(key, Reallocator::StoredPlanOf(job, *deps_.nodes));
  }
  manager_->Enqueue(key);
}

void TrainingJobReconciler::OnPod(const std::string& type, const json& pod) {
  const json& meta = pod["metadata"];
  if (!meta.contains("labels") || !meta["labels"].contains(kJobLabel)) return;
  const std::string key = meta.value("namespace", "default") + "/" + meta["labels"][kJobLabel].get<std::string>();
  {
    std::lock_guard lock(mu_);
    if (type == "DELETED") {
      job_pods_[key].erase(meta.value("name", ""));
    } else {
      job_pods_[key].insert(meta.value("name", ""));
    }
  }
  manager_->Enqueue(key);
}

StatusOr<milliseconds> TrainingJobReconciler::Reconcile(const std::string& key) {
  auto cached = manager_->cache().Get(Kind::kTrainingJob, key);
  if (!cached) return Gone(key);
  json job = std::move(*cached);
  if (job["metadata"].contains("deletionTimestamp")) return Deleting(job, key);
  STAR_RETURN_IF_ERROR(EnsureFinalizer(&job));
  auto spec = api::TrainingJobSpecFromJson(job.value("spec", json()), "spec");
  if (!spec.ok()) {
    STAR_RETURN_IF_ERROR(Fail(job, "InvalidSpec", spec.status().message()));
    return milliseconds(0);
  }
  milliseconds ttl_wait(0);
  STAR_ASSIGN_OR_RETURN(const bool expired, ExpireFinished(job, *spec, &ttl_wait));
  if (expired) return milliseconds(0);
  auto desired = DesiredPods(job, *spec, PodEnvOptions{deps_.endpoint->url(), deps_.endpoint->report_ca()});
  if (!desired.ok()) {
    STAR_RETURN_IF_ERROR(Fail(job, "InvalidSpec", desired.status().message()));
    return milliseconds(0);
  }
  auto ensured = EnsureToken(job);
  if (!ensured.ok() && ensured.status().code() == StatusCode::kFailedPrecondition) return milliseconds(0);
  STAR_ASSIGN_OR_RETURN(std::string token, std::move(ensured));
  // A restarted operator resumes from the decision recorded in status.
  STAR_RETURN_IF_ERROR(deps_.registry->Upsert(key, job["metadata"].value("generation", int64_t{0}), *spec, token,
                                              DecisionFromStatus(job.value("status", json::object())),
                                              RestartsOf(job)));
  STAR_RETURN_IF_ERROR(EnsureService(job));
  // A job whose pods go to Volcano waits (and says why) until its PodGroup exists.
  STAR_ASSIGN_OR_RETURN(const bool grouped, EnsurePodGroup(client_, deps_.records, &job, *desired));
  if (!grouped) return milliseconds(30000);
  STAR_ASSIGN_OR_RETURN(const milliseconds wait, Converge(&job, key, *spec, *desired, token));
  return SoonerWait(wait, ttl_wait);
}

// Deletes a finished job past spec.runPolicy.ttlSecondsAfterFinished (its owned objects
// go with it): true. Else false, with `*wait` the time left for a finished job with a TTL;
// the reconcile goes on (a failed job's leftover pods and reallocation are still cleaned up).
StatusOr<bool> TrainingJobReconciler::ExpireFinished(const json& job, const api::TrainingJobSpec& spec,
                                                     milliseconds* wait) {
  if (!spec.run_policy.ttl_seconds_after_finished) return false;
  const json status = job.value("status", json::object());
  const std::string phase = status.value("phase", "");
  if (phase != "Succeeded" && phase != "Failed") return false;
  const int64_t ttl = *spec.run_policy.ttl_seconds_after_finished;
  const auto left = TimeLeft(status.value("completionTime", ""), ttl, std::chrono::system_clock::now());
  if (!left) return false;
  if (left->count() > 0) {
    *wait = *left + milliseconds(1);
    return false;
  }
  Status s = client_->Delete(kube::TrainingJobs(), NamespaceOf(job), NameOf(job));
  if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  deps_.events->Emit(job, {"Normal", "TTLExpired",
                           "deleted " + std::to_string(ttl) +
                               " s after it finished (spec.runPolicy.ttlSecondsAfterFinished)"});
  return true;
}

// Pods, phase, worker nodes, the reallocation plan and the NodeAllocation wants.
StatusOr<milliseconds> TrainingJobReconciler::Converge(json* job, const std::string& key,
                                                       const api::TrainingJobSpec& spec, const std::vector<json>& desired,
                                                       const std::string& token) {
  milliseconds wait(0);
  const PhaseInput in = Observe(*job, key, spec, desired, &wait);
  const PhaseDecision d = DecidePhase(in);
  if (d.restarts != in.restarts) STAR_RETURN_IF_ERROR(RecordRestart(job, key, d.restarts, &wait));
  STAR_RETURN_IF_ERROR(DeletePods(*job, in, d));
  STAR_ASSIGN_OR_RETURN(const bool refused, CreatePods(*job, in, d, desired, token));
  if (refused) return milliseconds(0);
  STAR_ASSIGN_OR_RETURN(const milliseconds queued, SyncAdmittedCondition(client_, deps_.records, job, in.observed));
  wait = SoonerWait(wait, queued);
  STAR_RETURN_IF_ERROR(WritePhase(*job, d));
  deps_.registry->SetWorkerNodes(key, WorkerNodes(in.observed, spec.workers));
  STAR_RETURN_IF_ERROR(reallocator_->Reallocate(job, key, spec, d, in.observed));
  std::vector<json> pods;
  if (d.action != JobPodsAction::kDeleteAll) {
    for (const auto& [pod_name, pod] : in.observed) pods.push_back(pod);
  }
  deps_.nodes->SetJobWants(key, JobAllocationsByNode(pods));
  return wait;
}

// The job as DecidePhase sees it; `*wait` becomes the rest of a restart backoff.
PhaseInput TrainingJobReconciler::Observe(const json& job, const std::string& key, const api::TrainingJobSpec& spec,
                                          const std::vector<json>& desired, milliseconds* wait) {
  PhaseInput in;
  const json status = job.value("status", json::object());
  in.suspended = spec.suspend;
  in.deadline_exceeded = DeadlineExceeded(status, spec.run_policy, wait);
  in.current = api::ParseJobPhase(status.value("phase", "Pending")).value_or(api::JobPhase::kPending);
  for (const json& p : desired) in.desired.push_back(p["metadata"]["name"].get<std::string>());
  in.observed = ObservedPods(key, job["metadata"].value("uid", ""));
  in.outdated = Outdated(in.observed, desired);
  in.restarts = RestartsOf(job);
  in.max_restarts = spec.run_policy.backoff_limit.value_or(options_.max_restarts);
  std::lock_guard lock(mu_);
  auto it = restarted_at_.find(key);
  if (it == restarted_at_.end()) return in;
  const auto due = it->second + milliseconds(RestartBackoffMillis(in.restarts, options_.restart_backoff.count()));
  if (Clock::now() < due) {
    in.backoff_elapsed = false;
    *wait = SoonerWait(*wait, std::chrono::duration_cast<milliseconds>(due - Clock::now()) + milliseconds(1));
  }
  return in;
}

// The cached pods labelled with the job that it controls (ownerReference uid): a pod that
// only carries the label is not the job's to count, delete or restart the gang for.
std::map<std::string, json> TrainingJobReconciler::ObservedPods(const std::string& key, const std::string& job_uid) {
  std::set<std::string> names;
  {
    std::lock_guard lock(mu_);
    auto it = job_pods_.find(key);
    if (it != job_pods_.end()) names = it->second;
  }
  const std::string ns = key.substr(0, key.find('/'));
  std::map<std::string, json> out;
  for (const std::string& name : names) {
    auto pod = manager_->cache().Get(Kind::kPod, ns + "/" + name);
    if (pod && IsControlledBy(*pod, job_uid)) out[name] = std::move(*pod);
  }
  return out;
}

Status TrainingJobReconciler::RecordRestart(json* job, const std::string& key, int restarts, milliseconds* wait) {
  STAR_ASSIGN_OR_RETURN(
      json patched,
      client_->MergePatch(kube::TrainingJobs(), NamespaceOf(*job), NameOf(*job),
                          {{"metadata", {{"annotations", {{kRestartsAnnotation, std::to_string(restarts)}}}}}}));
  (*job)["metadata"] = patched["metadata"];
  std::lock_guard lock(mu_);
  restarted_at_[key] = Clock::now();
  *wait = SoonerWait(*wait, milliseconds(RestartBackoffMillis(restarts, options_.restart_backoff.count())));
  return Status::Ok();
}

// Every pod on kDeleteAll; else the pods no longer desired (fewer replicas).
Status TrainingJobReconciler::DeletePods(const json& job, const PhaseInput& in, const PhaseDecision& d) {
  const std::set<std::string> desired(in.desired.begin(), in.desired.end());
  for (const auto& [pod, _] : in.observed) {
    if (d.action != JobPodsAction::kDeleteAll && desired.count(pod)) continue;
    Status s = client_->Delete(kube::Pods(), NamespaceOf(job), pod);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  }
  return Status::Ok();
}

// On kCreateMissing: the token Secret (again) and every missing pod, all or none. True
// when the API refused a pod for good: the created ones are deleted and the job failed.
StatusOr<bool> TrainingJobReconciler::CreatePods(const json& job, const PhaseInput& in, const PhaseDecision& d,
                                                 const std::vector<json>& desired, const std::string& token) {
  if (d.action != JobPodsAction::kCreateMissing) return false;
  const std::string ns = NamespaceOf(job);
  if (desired.size() > in.observed.size()) {
    // The pods read their token from the Secret: it must exist (again) before they do.
    auto secret = client_->Create(Secrets(), ns, DesiredSecret(job, token));
    if (!secret.ok() && secret.status().code() != StatusCode::kAlreadyExists) return secret.status();
  }
  std::vector<std::string> created;
  for (const json& pod : desired) {
    const std::string pod_name = pod["metadata"]["name"];
    if (in.observed.count(pod_name)) continue;
    auto r = client_->Create(kube::Pods(), ns, pod);
    if (r.ok()) {
      created.push_back(pod_name);
      continue;
    }
    if (r.status().code() == StatusCode::kAlreadyExists) {
      // The job's own, not cached yet; or someone else's, which is left alone.
      auto existing = client_->Get(kube::Pods(), ns, pod_name);
      if (existing.ok() && !IsControlledBy(*existing, job["metadata"].value("uid", ""))) {
        deps_.events->Emit(job, {"Warning", "PodNameTaken",
                                 "pod " + pod_name + " exists and is not controlled by this TrainingJob; "
                                 "it is left alone and the job waits for the name"});
      }
      continue;
    }
    if (RetryableApiError(r.status())) return r.status();
    // Refused for good: none of the gang stays.
    for (const std::string& c : created) (void)client_->Delete(kube::Pods(), ns, c);
    STAR_RETURN_IF_ERROR(Fail(job, "PodCreateFailed", "pod " + pod_name + ": " + r.status().message()));
    return true;
  }
  return false;
}

// A job that no longer exists: out of the registry and the metrics; its entries leave
// every NodeAllocation (its finalizer was removed by hand, or a node's NodeAllocation was
// written back from an old copy).
StatusOr<milliseconds> TrainingJobReconciler::Gone(const std::string& key) {
  deps_.registry->Remove(key);
  manager_->metrics()->ForgetJob(key);
  {
    std::lock_guard lock(mu_);
    restarted_at_.erase(key);
  }
  reallocator_->Forget(key);
  deps_.nodes->SetJobWants(key, {});
  return milliseconds(0);
}

StatusOr<milliseconds> TrainingJobReconciler::Deleting(const json& job, const std::string& key) {
  STAR_ASSIGN_OR_RETURN(auto wait, Finalize(job));
  if (wait.count() > 0) return wait;
  deps_.registry->Remove(key);
  manager_->metrics()->ForgetJob(key);
  return milliseconds(0);
}

// Removes the job's entries from every NodeAllocation, then its finalizer. Returns how
// long to wait while entries are still listed (0 = done).
StatusOr<milliseconds> TrainingJobReconciler::Finalize(const json& job) {
  const std::string key = kube::KeyOf(job);
  deps_.nodes->SetJobWants(key, {});
  // The NodeAllocation informer requeues the job as its entries go; this is a fallback.
  if (deps_.nodes->Lists(key)) return milliseconds(1000);
  json finalizers = json::array();
  bool had = false;
  for (const json& f : job["metadata"].value("finalizers", json::array())) {
    if (f == kFinalizer) {
      had = true;
    } else {
      finalizers.push_back(f);
    }
  }
  if (!had) return milliseconds(0);
  auto r = client_->MergePatch(kube::TrainingJobs(), NamespaceOf(job), NameOf(job),
                               {{"metadata", {{"finalizers", finalizers}}}});
  if (!r.ok() && r.status().code() != StatusCode::kNotFound) return r.status();
  return milliseconds(0);
}

Status TrainingJobReconciler::EnsureFinalizer(json* job) {
  json finalizers = (*job)["metadata"].value("finalizers", json::array());
  for (const json& f : finalizers) {
    if (f == kFinalizer) return Status::Ok();
  }
  finalizers.push_back(kFinalizer);
  STAR_ASSIGN_OR_RETURN(json updated, client_->MergePatch(kube::TrainingJobs(), NamespaceOf(*job), NameOf(*job),
                                                          {{"metadata", {{"finalizers", finalizers}}}}));
  *job = std::move(updated);
  return Status::Ok();
}

// The job's report token: the registry's, else its Secret's (made when missing).
StatusOr<std::string> TrainingJobReconciler::EnsureToken(const json& job) {
  const std::string ns = NamespaceOf(job);
  const std::string name = NameOf(job);
  if (auto t = deps_.registry->Token(ns + "/" + name)) return *t;
  auto secret = client_->Get(Secrets(), ns, TokenSecretName(name));
  if (!secret.ok() && secret.status().code() == StatusCode::kNotFound) {
    secret = client_->Create(Secrets(), ns, DesiredSecret(job, report::RandomToken()));
    if (!secret.ok() && secret.status().code() == StatusCode::kAlreadyExists) {
      secret = client_->Get(Secrets(), ns, TokenSecretName(name));
    }
  }
  if (!secret.ok()) return secret.status();
  if (!IsControlledBy(*secret, job["metadata"].value("uid", ""))) return SecretNameTaken(job);
  auto token = SecretToken(*secret);
  if (!token) return Status::Internal("secret " + TokenSecretName(name) + ": no data.token");
  return *token;
}

// The token Secret's name is held by a Secret this job does not control: nothing is
// overwritten or read from it; the job fails with a condition and Event saying so.
// FailedPrecondition once recorded (the caller stops there), else the write's error.
Status TrainingJobReconciler::SecretNameTaken(const json& job) {
  const std::string secret = TokenSecretName(NameOf(job));
  STAR_RETURN_IF_ERROR(Fail(job, "SecretNameTaken",
                            "secret " + secret + " exists and is not controlled by this TrainingJob; "
                            "delete or rename it, then create the job again"));
  return Status::FailedPrecondition("secret " + secret + ": not controlled by the job");
}

// The headless Service, created again when it was deleted (its handler requeues the job).
Status TrainingJobReconciler::EnsureService(const json& job) {
  const json desired = DesiredService(job);
  const std::string ns = NamespaceOf(job);
  if (manager_->cache().Get(Kind::kService, ns + "/" + NameOf(desired))) return Status::Ok();
  auto r = client_->Create(kube::Services(), ns, desired);
  if (!r.ok() && r.status().code() != StatusCode::kAlreadyExists) return r.status();
  return Status::Ok();
}

// Writes phase, conditions and observedGeneration when they differ from `job`'s, with an
// Event when the phase changes.
Status TrainingJobReconciler::WritePhase(const json& job, const PhaseDecision& d) {
  const json old_status = job.value("status", json::object());
  const std::string phase(api::ToString(d.phase));
  // A terminal phase keeps the conditions (and reason) it was reached with.
  if ((d.phase == api::JobPhase::kSucceeded || d.phase == api::JobPhase::kFailed) &&
      old_status.value("phase", "") == phase) {
    return Status::Ok();
  }
  std::vector<api::Condition> conditions;
  for (const json& c : old_status.value("conditions", json::array())) {
    auto parsed = api::ConditionFromJson(c, "status.conditions");
    if (parsed.ok()) conditions.push_back(*parsed);
  }
  const int64_t generation = job["metadata"].value("generation", int64_t{0});
  const std::string now = kube::NowRfc3339();
  SetPhaseConditions(&conditions, d, now, generation);
  json cj = json::array();
  for (const auto& c : conditions) cj.push_back(api::ToJson(c));
  const json times = StatusTimes(old_status, d, now);
  if (old_status.value("phase", "") == phase && old_status.value("conditions", json::array()) == cj &&
      old_status.value("observedGeneration", int64_t{0}) == generation && times.empty()) {
    return Status::Ok();
  }
  json status = {{"phase", phase}, {"conditions", cj}, {"observedGeneration", generation}};
  status.update(times);
  STAR_RETURN_IF_ERROR(deps_.records->WritePhase(job, {{"status", std::move(status)}}));
  if (old_status.value("phase", "") != phase) {
    const bool bad = d.phase == api::JobPhase::kFailed || d.phase == api::JobPhase::kRestarting;
    deps_.events->Emit(job, {bad ? "Warning" : "Normal", d.reason, "phase " + phase + ": " + d.message});
  }
  return Status::Ok();
}

Status TrainingJobReconciler::Fail(const json& job, const std::string& reason, const std::string& message) {
  PhaseDecision d;
  d.phase = api::JobPhase::kFailed;
  d.reason = reason;
  d.message = message;
  return WritePhase(job, d);
}

}  // namespace star::op
