#include "star/operator/reconciler/operator.h"

#include <time.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "star/core/api/node_allocation.h"
#include "star/core/api/training_job.h"
#include "star/kube/informer.h"
#include "star/kube/leader_election.h"
#include "star/kube/workqueue.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/operator/reconciler/job_registry.h"
#include "star/operator/reconciler/reallocation.h"
#include "star/report/server.h"

namespace star::op {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

void Log(const std::string& line) { std::cerr << "star-operator: " << line << std::endl; }

std::string NowRfc3339() {
  const time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  tm utc{};
  gmtime_r(&t, &utc);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::string RandomToken() {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) s.push_back(kHex[rd() % 16]);
  return s;
}

kube::ResourceRef Secrets() { return {"", "v1", "secrets", true, "Secret"}; }
kube::ResourceRef Nodes() { return {"", "v1", "nodes", false, "Node"}; }

// Work-queue keys of NodeAllocations (job keys are "<namespace>/<name>").
constexpr char kNodeKeyPrefix[] = "node:";

bool Transient(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded ||
         s.code() == StatusCode::kAborted || s.code() == StatusCode::kAlreadyExists ||
         s.code() == StatusCode::kInternal || s.code() == StatusCode::kOutOfRange;
}

// Host and port of "HOST:PORT".
StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& s, const std::string& flag) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::InvalidArgument(flag + ": must be HOST:PORT, got \"" + s + "\"");
  }
  try {
    size_t used = 0;
    const int port = std::stoi(s.substr(colon + 1), &used);
    if (used != s.size() - colon - 1 || port < 0 || port > 65535) throw std::out_of_range("port");
    return std::make_pair(s.substr(0, colon), port);
  } catch (const std::exception&) {
    return Status::InvalidArgument(flag + ": bad port in \"" + s + "\"");
  }
}

struct EventSpec {
  std::string type;  // Normal | Warning
  std::string reason;
  std::string message;
};

EventSpec FromTimeline(const TimelineEvent& e) {
  const std::string w = "worker " + std::to_string(e.worker);
  if (e.event == "straggler") return {"Warning", "StragglerDetected", w + ": " + e.detail};
  if (e.event == "recovered") return {"Normal", "StragglerRecovered", w + " recovered"};
  if (e.event == "mode") return {"Normal", "SyncModeChanged", "mode " + e.detail};
  if (e.event == "amp_on") return {"Normal", "AmpEnabled", w + ": mixed precision on"};
  if (e.event == "amp_off") return {"Normal", "AmpDisabled", w + ": mixed precision off"};
  if (e.event == "batches") return {"Normal", "BatchesRebalanced", "local batches " + e.detail};
  return {"Normal", e.event, e.detail};
}

}  // namespace

struct Operator::Impl {
  kube::Client* client;
  OperatorOptions options;
  OperatorMetrics* metrics;
  JobRegistry registry;
  kube::WorkQueue queue;

  std::unique_ptr<kube::Informer> jobs, pods, allocations, services;
  std::unique_ptr<report::ReportServer> report_server;
  std::string report_url;
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  std::vector<std::thread> threads;
  std::mutex writer_mu;
  std::condition_variable writer_cv;

  std::mutex mu;  // guards the maps below
  std::map<std::string, std::set<std::string>> job_pods;  // job key -> pod names
  std::map<std::string, Clock::time_point> restarted_at;  // job key -> restart time
  // Active reallocation plans (job key -> its annotation's overrides), folded into one
  // override per pod; and the decision epoch each job last planned at without applying.
  std::map<std::string, std::map<std::string, PodOverride>> plans;
  std::map<std::string, PodOverride> folded;
  std::map<std::string, int64_t> planned_epoch;
  // Which nodes' NodeAllocations list a job's pods (job key -> nodes, node -> job keys),
  // from the allocations informer and the operator's own writes.
  std::map<std::string, std::set<std::string>> job_nodes, node_jobs;
  // What each job wants on each node (node -> job key -> its pods' entries, before
  // plan overrides); an empty list removes the job's entries. The node's key in the work
  // queue ("node:<name>") writes them, so the changes of many jobs to one node coalesce
  // into one write.
  std::map<std::string, std::map<std::string, std::vector<api::PodAllocation>>> node_wants;
  std::atomic<uint64_t> event_seq{0};
  std::mutex record_mu;  // decisions written to status one at a time (OnReport)

  explicit Impl(kube::Client* c, OperatorOptions o, OperatorMetrics* m)
      : client(c), options(std::move(o)), metrics(m), registry(NowRfc3339, options.loop) {}

  // ---- cache helpers

  std::map<std::string, json> ObservedPods(const std::string& ns, const std::string& job) {
    std::set<std::string> names;
    {
      std::lock_guard lock(mu);
      auto it = job_pods.find(ns + "/" + job);
      if (it != job_pods.end()) names = it->second;
    }
    std::map<std::string, json> out;
    for (const std::string& name : names) {
      if (auto pod = pods->Get(ns + "/" + name)) out[name] = std::move(*pod);
    }
    return out;
  }

  void OnPod(const std::string& type, const json& pod) {
    const json& meta = pod["metadata"];
    if (!meta.contains("labels") || !meta["labels"].contains(kJobLabel)) return;
    const std::string key =
        meta.value("namespace", "default") + "/" + meta["labels"][kJobLabel].get<std::string>();
    {
      std::lock_guard lock(mu);
      if (type == "DELETED") {
        job_pods[key].erase(meta.value("name", ""));
      } else {
        job_pods[key].insert(meta.value("name", ""));
      }
    }
    queue.Add(key);
  }

  // A job's plan as its annotation says, when the plan is in force (not while the job
  // is being deleted or has finished).
  std::map<std::string, PodOverride> PlanOf(const json& job) {
    const json& meta = job["metadata"];
    if (meta.contains("deletionTimestamp")) return {};
    const std::string phase = job.value("status", json::object()).value("phase", "");
    if (phase == "Succeeded" || phase == "Failed") return {};
    const json annotations = meta.value("annotations", json::object());
    if (!annotations.contains(kReallocationAnnotation) || !annotations[kReallocationAnnotation].is_string()) {
      return {};
    }
    auto plan = OverridesFromAnnotation(annotations[kReallocationAnnotation].get<std::string>());
    if (!plan.ok()) {
      Log("trainingjob " + kube::KeyOf(job) + ": " + plan.status().message() + " (plan ignored)");
      return {};
    }
    return *plan;
  }

  // Records `key`'s plan; every node with a pod in the old or the new plan is written
  // again (its NodeAllocation follows the overrides).
  void UpdatePlan(const std::string& key, const std::map<std::string, PodOverride>& plan) {
    std::set<std::string> affected;
    {
      std::lock_guard lock(mu);
      auto it = plans.find(key);
      const bool had = it != plans.end();
      if ((had ? it->second : std::map<std::string, PodOverride>{}) == plan) return;
      if (had) {
        for (const auto& [uid, o] : it->second) affected.insert(NodeKey(o.node));
      }
      for (const auto& [uid, o] : plan) affected.insert(NodeKey(o.node));
      if (plan.empty()) {
        plans.erase(key);
      } else {
        plans[key] = plan;
      }
      folded = FoldOverrides(plans);
    }
    for (const std::string& node : affected) queue.Add(node);
  }

  void OnJob(const std::string& type, const json& job) {
    const std::string key = kube::KeyOf(job);
    UpdatePlan(key, type == "DELETED" ? std::map<std::string, PodOverride>{} : PlanOf(job));
    queue.Add(key);
  }

  void OnAllocation(const std::string& type, const json& na) {
    const std::string node = na["metadata"].value("name", "");
    std::set<std::string> now;
    if (type != "DELETED") {
      for (const json& p : na.value("spec", json::object()).value("pods", json::array())) {
        const std::string ns = p.value("namespace", "");
        // Another namespace's entries belong to the operator watching it.
        if (!options.ns.empty() && ns != options.ns) continue;
        if (auto job = JobOfPodName(p.value("name", ""))) now.insert(ns + "/" + *job);
      }
    }
    std::vector<std::string> appeared;
    std::lock_guard lock(mu);
    for (const std::string& job : now) {
      if (!node_jobs[node].count(job)) appeared.push_back(job);
    }
    // Reconciled: entries of a job that no longer exists are removed there.
    for (const std::string& job : appeared) queue.Add(job);
    for (const std::string& job : node_jobs[node]) {
      if (now.count(job)) continue;
      queue.Add(job);  // its entries left this node: a finalizer may be waiting for that
      auto it = job_nodes.find(job);
      if (it == job_nodes.end()) continue;
      it->second.erase(node);
      if (it->second.empty()) job_nodes.erase(it);
    }
    for (const std::string& job : now) job_nodes[job].insert(node);
    if (now.empty()) {
      node_jobs.erase(node);
    } else {
      node_jobs[node] = std::move(now);
    }
  }

  // ---- events

  void Emit(const json& job, const EventSpec& e) {
    const std::string ns = job["metadata"].value("namespace", "default");
    const std::string name = job["metadata"].value("name", "");
    const std::string now = NowRfc3339();
    char suffix[32];
    snprintf(suffix, sizeof suffix, "%llx.%llx",
             static_cast<unsigned long long>(std::chrono::system_clock::now().time_since_epoch().count()),
             static_cast<unsigned long long>(event_seq++));
    json ev = {{"apiVersion", "v1"},
               {"kind", "Event"},
               {"metadata", {{"name", name + "." + suffix}, {"namespace", ns}}},
               {"involvedObject",
                {{"apiVersion", "star.dev/v1alpha1"},
                 {"kind", "TrainingJob"},
                 {"name", name},
                 {"namespace", ns},
                 {"uid", job["metadata"].value("uid", "")}}},
               {"reason", e.reason},
               {"message", e.message},
               {"type", e.type},
               {"count", 1},
               {"firstTimestamp", now},
               {"lastTimestamp", now},
               {"source", {{"component", "star-operator"}}},
               {"reportingComponent", "star-operator"}};
    auto r = client->Create(kube::Events(), ns, ev);
    if (!r.ok()) Log("event " + e.reason + " for " + ns + "/" + name + ": " + r.status().ToString());
  }

  // ---- reconcile parts

  Status EnsureFinalizer(json* job) {
    json finalizers = (*job)["metadata"].value("finalizers", json::array());
    for (const json& f : finalizers) {
      if (f == kFinalizer) return Status::Ok();
    }
    finalizers.push_back(kFinalizer);
    const std::string ns = (*job)["metadata"].value("namespace", "default");
    STAR_ASSIGN_OR_RETURN(json updated,
                          client->MergePatch(kube::TrainingJobs(), ns,
                                             (*job)["metadata"]["name"].get<std::string>(),
                                             {{"metadata", {{"finalizers", finalizers}}}}));
    *job = std::move(updated);
    return Status::Ok();
  }

  StatusOr<std::string> EnsureToken(const json& job) {
    const std::string ns = job["metadata"].value("namespace", "default");
    const std::string name = job["metadata"]["name"].get<std::string>();
    if (auto t = registry.Token(ns + "/" + name)) return *t;
    auto secret = client->Get(Secrets(), ns, TokenSecretName(name));
    if (!secret.ok() && secret.status().code() == StatusCode::kNotFound) {
      secret = client->Create(Secrets(), ns, DesiredSecret(job, RandomToken()));
      if (!secret.ok() && secret.status().code() == StatusCode::kAlreadyExists) {
        secret = client->Get(Secrets(), ns, TokenSecretName(name));
      }
    }
    if (!secret.ok()) return secret.status();
    auto token = SecretToken(*secret);
    if (!token) return Status::Internal("secret " + TokenSecretName(name) + ": no data.token");
    return *token;
  }

  // The headless Service, created again when it was deleted (the services informer
  // requeues the job then).
  Status EnsureService(const json& job) {
    const json desired = DesiredService(job);
    const std::string ns = job["metadata"].value("namespace", "default");
    if (services->Get(ns + "/" + desired["metadata"]["name"].get<std::string>())) return Status::Ok();
    auto r = client->Create(kube::Services(), ns, desired);
    if (!r.ok() && r.status().code() != StatusCode::kAlreadyExists) return r.status();
    return Status::Ok();
  }

  static std::string NodeKey(const std::string& node) { return kNodeKeyPrefix + node; }

  // Records what the job wants in every NodeAllocation (its pods on that node; nothing
  // when `pod_list` is empty: the deletion path) and queues the nodes whose wants changed.
  void SyncAllocations(const json& job, const std::vector<json>& pod_list) {
    const std::string key = job["metadata"].value("namespace", "default") + "/" + job["metadata"]["name"].get<std::string>();
    auto by_node = JobAllocationsByNode(pod_list);
    std::vector<std::string> changed;
    {
      std::lock_guard lock(mu);
      std::set<std::string> nodes;
      for (const auto& [node, _] : by_node) nodes.insert(node);
      auto listed = job_nodes.find(key);
      if (listed != job_nodes.end()) nodes.insert(listed->second.begin(), listed->second.end());
      for (const std::string& node : nodes) {
        std::vector<api::PodAllocation> mine = by_node.count(node) ? by_node[node] : std::vector<api::PodAllocation>{};
        auto& wants = node_wants[node];
        auto it = wants.find(key);
        if (it != wants.end() && it->second == mine) continue;
        wants[key] = std::move(mine);
        changed.push_back(node);
      }
    }
    for (const std::string& node : changed) queue.Add(NodeKey(node));
  }

  // Writes one NodeAllocation: every job's wants on the node, with the plans' overrides;
  // entries of other jobs (and pods STAR does not manage) stay. Level-based: compared
  // with the cached object first, written only when different (a 409 reads it again).
  Status ReconcileNode(const std::string& node) {
    std::map<std::string, std::vector<api::PodAllocation>> wants;
    std::map<std::string, PodOverride> overrides;
    {
      std::lock_guard lock(mu);
      auto it = node_wants.find(node);
      if (it == node_wants.end()) return Status::Ok();
      wants = it->second;
      overrides = folded;
    }
    auto merge = [&](const api::NodeAllocationSpec& current) {
      api::NodeAllocationSpec merged = current;
      for (const auto& [key, mine] : wants) {
        const auto slash = key.find('/');
        merged = MergeJobAllocations(merged, key.substr(0, slash), key.substr(slash + 1), ApplyOverrides(mine, overrides));
      }
      return merged;
    };
    bool first = true;
    Status s = kube::RetryOnConflict([&]() -> Status {
      std::optional<json> current = first ? allocations->Get(node) : std::nullopt;
      if (!first || !current) {
        auto fresh = client->Get(kube::NodeAllocations(), "", node);
        if (!fresh.ok() && fresh.status().code() != StatusCode::kNotFound) return fresh.status();
        current = fresh.ok() ? std::optional<json>(std::move(*fresh)) : std::nullopt;
      }
      first = false;
      if (!current) {
        api::NodeAllocation a;
        a.name = node;
        a.spec = merge({});
        if (a.spec.pods.empty()) return Status::Ok();
        auto created = client->Create(kube::NodeAllocations(), "", api::ToJson(a));
        if (!created.ok() && created.status().code() == StatusCode::kAlreadyExists) {
          return Status::Aborted("NodeAllocation " + node + " appeared");
        }
        return created.status();
      }
      auto spec = api::NodeAllocationSpecFromJson((*current)["spec"]);
      if (!spec.ok()) return spec.status().WithPrefix("NodeAllocation " + node);
      api::NodeAllocationSpec merged = merge(*spec);
      if (merged == *spec) return Status::Ok();
      json updated = *current;
      updated["spec"] = api::ToJson(merged);
      return client->Update(kube::NodeAllocations(), "", updated).status();
    });
    if (!s.ok()) return s;
    std::lock_guard lock(mu);
    auto it = node_wants.find(node);
    if (it == node_wants.end()) return Status::Ok();
    for (const auto& [key, mine] : wants) {
      auto w = it->second.find(key);
      if (w == it->second.end() || w->second != mine) continue;  // changed meanwhile: queued again
      if (mine.empty()) {
        it->second.erase(w);  // removed: nothing left to want
      } else {
        // Known at once, before the informer sees the write: a deletion that follows
        // right away still finds this node.
        job_nodes[key].insert(node);
        node_jobs[node].insert(key);
      }
    }
    if (it->second.empty()) node_wants.erase(it);
    return Status::Ok();
  }

  // Removes the job's entries from every NodeAllocation, then its finalizer. Returns
  // how long to wait while entries are still listed (0 = done).
  StatusOr<std::chrono::milliseconds> Finalize(const json& job) {
    SyncAllocations(job, {});
    {
      std::lock_guard lock(mu);
      // The allocations informer requeues the job as its entries go; this is a fallback.
      if (job_nodes.count(kube::KeyOf(job))) return std::chrono::milliseconds(1000);
    }
    json finalizers = json::array();
    bool had = false;
    for (const json& f : job["metadata"].value("finalizers", json::array())) {
      if (f == kFinalizer) {
        had = true;
      } else {
        finalizers.push_back(f);
      }
    }
    if (!had) return std::chrono::milliseconds(0);
    auto r = client->MergePatch(kube::TrainingJobs(), job["metadata"].value("namespace", "default"),
                                job["metadata"]["name"].get<std::string>(),
                                {{"metadata", {{"finalizers", finalizers}}}});
    if (!r.ok() && r.status().code() != StatusCode::kNotFound) return r.status();
    return std::chrono::milliseconds(0);
  }

  // Writes phase, conditions and observedGeneration when they differ from `job`'s.
  Status WritePhase(const json& job, const PhaseDecision& d) {
    const json old_status = job.value("status", json::object());
    const std::string phase(api::ToString(d.phase));
    // A terminal phase keeps the conditions (and reason) it was reached with.
    if ((d.phase == api::JobPhase::kSucceeded || d.phase == api::JobPhase::kFailed) &&
        old_status.value("phase", "") == phase) {
      return Status::Ok();
    }
    std::vector<api::Condition> conditions;
    if (old_status.contains("conditions")) {
      for (size_t i = 0; i < old_status["conditions"].size(); ++i) {
        auto c = api::ConditionFromJson(old_status["conditions"][i], "status.conditions");
        if (c.ok()) conditions.push_back(*c);
      }
    }
    const int64_t generation = job["metadata"].value("generation", int64_t{0});
    SetPhaseConditions(&conditions, d, NowRfc3339(), generation);
    json cj = json::array();
    for (const auto& c : conditions) cj.push_back(api::ToJson(c));
    if (old_status.value("phase", "") == phase && old_status.value("conditions", json::array()) == cj &&
        old_status.value("observedGeneration", int64_t{0}) == generation) {
      return Status::Ok();
    }
    json patch = {{"status", {{"phase", phase}, {"conditions", cj}, {"observedGeneration", generation}}}};
    // Not interleaved with decision records (OnReport): the baseline below must not
    // replace a decision recorded since `job` was read.
    std::unique_lock record_lock(record_mu);
    if (!old_status.contains("syncMode") && registry.RecordedEpoch(kube::KeyOf(job)) == 0) {
      // The mode the pods start in, until a report says more (kubectl get tj: MODE).
      patch["status"]["syncMode"] = "ssgd";
      const json replicas = job.value("spec", json::object()).value("workers", json::object()).value("replicas", json());
      if (replicas.is_number_integer() && replicas.get<int64_t>() >= 1) patch["status"]["k"] = replicas;
    }
    auto r = client->MergePatch(kube::TrainingJobs(), job["metadata"].value("namespace", "default"),
                                job["metadata"]["name"].get<std::string>(), patch, /*status=*/true);
    record_lock.unlock();
    if (!r.ok()) return r.status();
    if (old_status.value("phase", "") != phase) {
      const bool bad = d.phase == api::JobPhase::kFailed || d.phase == api::JobPhase::kRestarting;
      Emit(job, {bad ? "Warning" : "Normal", d.reason, "phase " + phase + ": " + d.message});
    }
    return Status::Ok();
  }

  Status Fail(const json& job, const std::string& reason, const std::string& message) {
    PhaseDecision d;
    d.phase = api::JobPhase::kFailed;
    d.reason = reason;
    d.message = message;
    return WritePhase(job, d);
  }

  // The node a pod runs on and its allocatable CPU in millicores (nullopt unknown).
  std::optional<int64_t> NodeCpu(const std::string& node) {
    auto n = client->Get(Nodes(), "", node);
    if (!n.ok()) return std::nullopt;
    const json alloc = n->value("status", json::object()).value("allocatable", json::object());
    if (!alloc.contains("cpu")) return std::nullopt;
    return api::ParseCpuMillicores(alloc["cpu"]);
  }

  // Resource reallocation (reallocation.h): plans when the job left SSGD with
  // stragglers, once per decision; undoes when it is back in SSGD or not running.
  Status Reallocate(json* job, const std::string& key, const api::TrainingJobSpec& spec,
                    const PhaseDecision& d, const std::map<std::string, json>& observed) {
    const std::string ns = (*job)["metadata"].value("namespace", "default");
    const std::string name = (*job)["metadata"]["name"].get<std::string>();
    const json annotations = (*job)["metadata"].value("annotations", json::object());
    const bool has = annotations.contains(kReallocationAnnotation);
    const auto snap = registry.Snapshot(key);
    const bool keep = spec.mitigation.resource_reallocation.enabled && d.phase == api::JobPhase::kRunning &&
                      snap && snap->mode != api::SyncMode::kSsgd;
    if (has && !keep) {
      STAR_ASSIGN_OR_RETURN(json patched,
                            client->MergePatch(kube::TrainingJobs(), ns, name,
                                               {{"metadata", {{"annotations", {{kReallocationAnnotation, nullptr}}}}}}));
      (*job)["metadata"] = patched["metadata"];
      UpdatePlan(key, {});
      Emit(*job, {"Normal", "ReallocationUndone",
                  std::string("job ") + (d.phase == api::JobPhase::kRunning ? "back in SSGD" : "not running") +
                      ": the allocations from before the plan are restored"});
      return Status::Ok();
    }
    if (has || !keep || snap->stragglers.empty()) return Status::Ok();
    {
      std::lock_guard lock(mu);
      auto it = planned_epoch.find(key);
      if (it != planned_epoch.end() && it->second == snap->epoch) return Status::Ok();
    }
    ReallocationInput in;
    in.job = key;
    in.workers = snap->workers;
    for (const api::StragglerStatus& st : snap->stragglers) {
      for (const auto& [pod_name, pod] : observed) {
        if (WorkerRank(pod) != st.worker) continue;
        in.stragglers.push_back({pod["metadata"].value("uid", ""),
                                 pod.value("spec", json::object()).value("nodeName", ""), st.worker, st.cause,
                                 st.slowdown});
      }
    }
    std::set<std::string> nodes;
    for (const StragglingPod& p : in.stragglers) {
      if (!p.node.empty()) nodes.insert(p.node);
    }
    for (const std::string& node : nodes) {
      if (auto cpu = NodeCpu(node)) in.node_cpu[node] = *cpu;
      auto cached = allocations->Get(node);
      if (!cached) continue;
      auto a = api::NodeAllocationFromJson(*cached);
      if (!a.ok()) {  // planned without it: the planner then says what is missing
        Log("NodeAllocation " + node + ": " + a.status().message());
        continue;
      }
      for (const api::PodAllocation& p : a->spec.pods) {
        auto pod = pods->Get(p.namespace_ + "/" + p.name);
        if (!pod) continue;
        const json labels = (*pod)["metadata"].value("labels", json::object());
        if (!labels.contains(kJobLabel)) continue;
        PodOwner owner;
        owner.job = p.namespace_ + "/" + labels.value(kJobLabel, "");
        owner.rank = WorkerRank(*pod);
        if (!in.loads.count(owner.job)) {
          if (auto other = registry.Snapshot(owner.job)) in.loads[owner.job] = other->load;
        }
        in.owners[p.uid] = owner;
      }
      in.allocations.push_back(std::move(*a));
    }
    auto out = PlanJobReallocation(in);
    {
      std::lock_guard lock(mu);
      planned_epoch[key] = snap->epoch;
    }
    if (!out.ok()) {
      Emit(*job, {"Warning", "ReallocationSkipped", out.status().message()});
      metrics->Reallocation(key, "error");
      return Status::Ok();
    }
    if (!out->apply) {
      Emit(*job, {"Normal", "ReallocationSkipped", out->message});
      metrics->Reallocation(key, "skipped");
      return Status::Ok();
    }
    // Written before it is acted on: a restarted operator finds the plan here.
    STAR_ASSIGN_OR_RETURN(
        json patched,
        client->MergePatch(kube::TrainingJobs(), ns, name,
                           {{"metadata", {{"annotations", {{kReallocationAnnotation, OverridesToAnnotation(out->overrides)}}}}}}));
    (*job)["metadata"] = patched["metadata"];
    UpdatePlan(key, out->overrides);
    Emit(*job, {"Normal", "Reallocated", out->message});
    metrics->Reallocation(key, "applied");
    return Status::Ok();
  }

  // Returns how long to wait before the key must be looked at again (0 = not needed).
  StatusOr<std::chrono::milliseconds> ReconcileJob(const std::string& key) {
    auto cached = jobs->Get(key);
    if (!cached) {
      registry.Remove(key);
      metrics->ForgetJob(key);
      {
        std::lock_guard lock(mu);
        restarted_at.erase(key);
        planned_epoch.erase(key);
      }
      // Entries of a job that is gone (its finalizer was removed by hand, or a node's
      // NodeAllocation was written back from an old copy): removed from every node.
      const auto slash = key.find('/');
      const json gone = {{"metadata",
                          {{"namespace", key.substr(0, slash)},
                           {"name", key.substr(slash + 1)},
                           {"deletionTimestamp", NowRfc3339()}}}};
      SyncAllocations(gone, {});
      return std::chrono::milliseconds(0);
    }
    json job = std::move(*cached);
    const std::string ns = job["metadata"].value("namespace", "default");
    const std::string name = job["metadata"]["name"].get<std::string>();
    if (job["metadata"].contains("deletionTimestamp")) {
      STAR_ASSIGN_OR_RETURN(auto wait, Finalize(job));
      if (wait.count() > 0) return wait;
      registry.Remove(key);
      metrics->ForgetJob(key);
      return std::chrono::milliseconds(0);
    }
    STAR_RETURN_IF_ERROR(EnsureFinalizer(&job));

    auto spec = api::TrainingJobSpecFromJson(job.value("spec", json()), "spec");
    if (!spec.ok()) {
      STAR_RETURN_IF_ERROR(Fail(job, "InvalidSpec", spec.status().message()));
      return std::chrono::milliseconds(0);
    }
    PodEnvOptions env{report_url};
    auto desired = DesiredPods(job, *spec, env);
    if (!desired.ok()) {
      STAR_RETURN_IF_ERROR(Fail(job, "InvalidSpec", desired.status().message()));
      return std::chrono::milliseconds(0);
    }
    STAR_ASSIGN_OR_RETURN(std::string token, EnsureToken(job));
    // A restarted operator resumes from the decision recorded in status.
    STAR_RETURN_IF_ERROR(registry.Upsert(key, job["metadata"].value("generation", int64_t{0}), *spec, token,
                                         DecisionFromStatus(job.value("status", json::object()))));
    STAR_RETURN_IF_ERROR(EnsureService(job));

    PhaseInput in;
    const json status = job.value("status", json::object());
    in.current = api::ParseJobPhase(status.value("phase", "Pending")).value_or(api::JobPhase::kPending);
    for (const json& p : *desired) in.desired.push_back(p["metadata"]["name"].get<std::string>());
    in.observed = ObservedPods(ns, name);
    if (!desired->empty()) {
      const json want = (*desired)[0]["metadata"]["annotations"][kPodTemplateHashAnnotation];
      for (const auto& [pod_name, pod] : in.observed) {
        const json annotations = pod["metadata"].value("annotations", json::object());
        if (pod["metadata"].contains("deletionTimestamp") || !annotations.contains(kPodTemplateHashAnnotation)) {
          continue;
        }
        in.outdated |= annotations[kPodTemplateHashAnnotation] != want;
      }
    }
    const json annotations = job["metadata"].value("annotations", json::object());
    if (annotations.contains(kRestartsAnnotation) && annotations[kRestartsAnnotation].is_string()) {
      try {
        in.restarts = std::stoi(annotations[kRestartsAnnotation].get<std::string>());
      } catch (const std::exception&) {
        in.restarts = 0;
      }
    }
    in.max_restarts = options.max_restarts;
    std::chrono::milliseconds wait(0);
    {
      std::lock_guard lock(mu);
      auto it = restarted_at.find(key);
      if (it != restarted_at.end()) {
        const auto due = it->second + std::chrono::milliseconds(
                                          RestartBackoffMillis(in.restarts, options.restart_backoff.count()));
        if (Clock::now() < due) {
          in.backoff_elapsed = false;
          wait = std::chrono::duration_cast<std::chrono::milliseconds>(due - Clock::now()) +
                 std::chrono::milliseconds(1);
        }
      }
    }
    PhaseDecision d = DecidePhase(in);

    if (d.restarts != in.restarts) {
      STAR_ASSIGN_OR_RETURN(
          json patched,
          client->MergePatch(kube::TrainingJobs(), ns, name,
                             {{"metadata", {{"annotations", {{kRestartsAnnotation, std::to_string(d.restarts)}}}}}}));
      job["metadata"] = patched["metadata"];
      std::lock_guard lock(mu);
      restarted_at[key] = Clock::now();
      wait = std::chrono::milliseconds(RestartBackoffMillis(d.restarts, options.restart_backoff.count()));
    }

    std::set<std::string> desired_names(in.desired.begin(), in.desired.end());
    if (d.action == PodAction::kDeleteAll) {
      for (const auto& [pod, _] : in.observed) {
        Status s = client->Delete(kube::Pods(), ns, pod);
        if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
      }
    } else {
      // Pods no longer desired (fewer replicas).
      for (const auto& [pod, _] : in.observed) {
        if (desired_names.count(pod)) continue;
        Status s = client->Delete(kube::Pods(), ns, pod);
        if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
      }
    }
    if (d.action == PodAction::kCreateMissing && desired->size() > in.observed.size()) {
      // The pods read their token from the Secret: it must exist (again) before they do.
      auto secret = client->Create(Secrets(), ns, DesiredSecret(job, token));
      if (!secret.ok() && secret.status().code() != StatusCode::kAlreadyExists) return secret.status();
    }
    if (d.action == PodAction::kCreateMissing) {
      std::vector<std::string> created;
      for (const json& pod : *desired) {
        const std::string pod_name = pod["metadata"]["name"];
        if (in.observed.count(pod_name)) continue;
        auto r = client->Create(kube::Pods(), ns, pod);
        if (r.ok()) {
          created.push_back(pod_name);
          continue;
        }
        if (r.status().code() == StatusCode::kAlreadyExists) continue;
        if (Transient(r.status())) return r.status();
        // Refused for good: none of the gang stays.
        for (const std::string& c : created) (void)client->Delete(kube::Pods(), ns, c);
        STAR_RETURN_IF_ERROR(Fail(job, "PodCreateFailed", "pod " + pod_name + ": " + r.status().message()));
        return std::chrono::milliseconds(0);
      }
    }
    STAR_RETURN_IF_ERROR(WritePhase(job, d));

    std::vector<json> pod_list;
    std::vector<std::string> nodes(static_cast<size_t>(spec->workers.replicas));
    for (const auto& [pod_name, pod] : in.observed) {
      pod_list.push_back(pod);
      const int rank = WorkerRank(pod);
      if (rank >= 0 && rank < spec->workers.replicas) {
        nodes[static_cast<size_t>(rank)] = pod.value("spec", json::object()).value("nodeName", "");
      }
    }
    registry.SetWorkerNodes(key, std::move(nodes));
    STAR_RETURN_IF_ERROR(Reallocate(&job, key, *spec, d, in.observed));
    if (d.action == PodAction::kDeleteAll) pod_list.clear();
    SyncAllocations(job, pod_list);
    return wait;
  }

  void Worker() {
    while (!stopping) {
      auto key = queue.Get(std::chrono::milliseconds(200));
      if (!key) continue;
      const auto start = Clock::now();
      StatusOr<std::chrono::milliseconds> r = std::chrono::milliseconds(0);
      if (key->rfind(kNodeKeyPrefix, 0) == 0) {
        Status s = ReconcileNode(key->substr(sizeof kNodeKeyPrefix - 1));
        if (!s.ok()) r = s;
      } else {
        r = ReconcileJob(*key);
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (r.ok()) {
        queue.Forget(*key);
        if (r->count() > 0) queue.AddAfter(*key, *r);
        metrics->Reconciled(r->count() > 0 ? "requeue" : "success", seconds);
      } else {
        if (Transient(r.status()) || r.status().code() == StatusCode::kNotFound) {
          queue.AddRateLimited(*key);
          metrics->Reconciled("requeue", seconds);
        } else {
          Log("reconcile " + *key + ": " + r.status().ToString());
          queue.AddRateLimited(*key);
          metrics->Reconciled("error", seconds);
        }
      }
      queue.Done(*key);
    }
  }

  void StatusWriter() {
    std::unique_lock lock(writer_mu);
    while (!stopping) {
      writer_cv.wait_for(lock, options.status_interval, [&] { return stopping.load(); });
      if (stopping) break;
      lock.unlock();
      for (JobUpdate& u : registry.Drain()) {
        metrics->JobState(u.key, u.mode, u.stragglers);
        auto job = jobs->Get(u.key);
        if (!job) continue;
        const auto slash = u.key.find('/');
        {
          // Not interleaved with OnReport's decision records; a decision recorded since
          // Drain is newer than what `u` holds: its fields stay as recorded.
          std::lock_guard record_lock(record_mu);
          if (registry.RecordedEpoch(u.key) != u.decision_epoch) {
            for (const char* k : kDecisionStatusKeys) u.status.erase(k);
          }
          auto r = client->MergePatch(kube::TrainingJobs(), u.key.substr(0, slash), u.key.substr(slash + 1),
                                      {{"status", u.status}}, true);
          if (!r.ok()) Log("status of " + u.key + ": " + r.status().ToString());
        }
        bool replan = false;
        for (const TimelineEvent& e : u.events) {
          Emit(*job, FromTimeline(e));
          replan |= e.event == "mode" || e.event == "straggler";
        }
        // A new mode or straggler may call for a reallocation plan (or its undo).
        if (replan) queue.Add(u.key);
      }
      lock.lock();
    }
  }

  std::optional<api::Decision> OnReport(const api::WorkerReport& report) {
    double latency = 0;
    bool fresh = false;
    auto d = registry.Observe(report, &latency, &fresh);
    if (!d.ok()) throw std::invalid_argument(d.status().message());
    if (fresh) metrics->Decision(report.job, latency);
    // A decision reaches the workers only once status records it: a restarted operator
    // resumes from there (workers ignore decision epochs they have seen).
    // Writes are serialised (and re-read the newest decision) so that an older decision
    // can never overwrite a newer one; reports without a new decision skip the lock.
    if (registry.Unrecorded(report.job)) {
      std::lock_guard lock(record_mu);
      auto unrecorded = registry.Unrecorded(report.job);
      if (!unrecorded) return *d;
      const auto slash = report.job.find('/');
      auto r = client->MergePatch(kube::TrainingJobs(), report.job.substr(0, slash), report.job.substr(slash + 1),
                                  {{"status", DecisionStatus(*unrecorded)}}, /*status=*/true);
      // A 500: the worker goes on and learns the decision from a later report.
      if (!r.ok()) throw std::runtime_error("decision epoch " + std::to_string(unrecorded->epoch) +
                                            " not recorded: " + r.status().ToString());
      registry.Recorded(report.job, unrecorded->epoch);
    }
    return *d;
  }
};

Operator::Operator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Operator::~Operator() { Stop(); }

StatusOr<std::unique_ptr<Operator>> Operator::Create(kube::Client* client, OperatorOptions options,
                                                     OperatorMetrics* metrics) {
  if (client == nullptr || metrics == nullptr) return Status::InvalidArgument("client/metrics: required");
  if (options.max_restarts < 0) {
    return Status::InvalidArgument("max_restarts: must be >= 0, got " + std::to_string(options.max_restarts));
  }
  if (options.status_interval.count() <= 0) {
    return Status::InvalidArgument("status_interval: must be > 0 ms");
  }
  if (options.reconcile_threads < 1) return Status::InvalidArgument("reconcile_threads: must be >= 1");
  if (!options.report_listen.empty()) {
    STAR_ASSIGN_OR_RETURN(auto hp, SplitHostPort(options.report_listen, "report_listen"));
    (void)hp;
  }
  return std::unique_ptr<Operator>(new Operator(std::make_unique<Impl>(client, std::move(options), metrics)));
}

Status Operator::Start() {
  Impl& m = *impl_;
  if (!m.options.report_listen.empty()) {
    STAR_ASSIGN_OR_RETURN(auto hp, SplitHostPort(m.options.report_listen, "report_listen"));
    report::ReportServerOptions ro;
    ro.host = hp.first;
    ro.port = hp.second;
    ro.job_token = [&m](const std::string& job) { return m.registry.Token(job); };
    // OnReport is thread-safe (the registry locks); a job whose decision waits on the API
    // server does not hold up the others' reports.
    ro.serialize_handler = false;
    STAR_ASSIGN_OR_RETURN(m.report_server,
                          report::ReportServer::Start(ro, [&m](const api::WorkerReport& r) { return m.OnReport(r); }));
  }
  m.report_url = !m.options.report_url.empty() ? m.options.report_url
                 : m.report_server                ? m.report_server->base_url()
                                                  : "";
  kube::InformerOptions io;
  io.ns = m.options.ns;
  m.jobs = std::make_unique<kube::Informer>(m.client, kube::TrainingJobs(), io,
                                            [&m](const std::string& type, const json& obj) { m.OnJob(type, obj); });
  kube::InformerOptions po = io;
  po.label_selector = kJobLabel;
  m.pods = std::make_unique<kube::Informer>(m.client, kube::Pods(), po,
                                            [&m](const std::string& type, const json& obj) { m.OnPod(type, obj); });
  m.allocations = std::make_unique<kube::Informer>(
      m.client, kube::NodeAllocations(), kube::InformerOptions{},
      [&m](const std::string& type, const json& obj) { m.OnAllocation(type, obj); });
  // The jobs' Services (labelled with their job): a deleted one is made again.
  m.services = std::make_unique<kube::Informer>(
      m.client, kube::Services(), po, [&m](const std::string& type, const json& obj) {
        const json labels = obj["metadata"].value("labels", json::object());
        if (type == "DELETED" && labels.contains(kJobLabel) && labels[kJobLabel].is_string()) {
          m.queue.Add(obj["metadata"].value("namespace", "default") + "/" + labels[kJobLabel].get<std::string>());
        }
      });
  // Pods first: a job reconciled before its pods are cached would create them again
  // (harmless, AlreadyExists) and misjudge its phase.
  m.pods->Start();
  m.allocations->Start();
  m.services->Start();
  if (!m.pods->WaitForSync(m.options.sync_timeout) || !m.allocations->WaitForSync(m.options.sync_timeout) ||
      !m.services->WaitForSync(m.options.sync_timeout)) {
    return Status::Unavailable("informers: no first list within the sync timeout");
  }
  m.jobs->Start();
  if (!m.jobs->WaitForSync(m.options.sync_timeout)) {
    return Status::Unavailable("informers: no first list of trainingjobs within the sync timeout");
  }
  for (int i = 0; i < m.options.reconcile_threads; ++i) m.threads.emplace_back([&m] { m.Worker(); });
  m.threads.emplace_back([&m] { m.StatusWriter(); });
  m.started = true;
  return Status::Ok();
}

void Operator::Stop() {
  Impl& m = *impl_;
  if (m.stopping.exchange(true)) return;
  {
    std::lock_guard lock(m.writer_mu);
    m.writer_cv.notify_all();
  }
  m.queue.ShutDown();
  for (std::thread& t : m.threads) t.join();
  m.threads.clear();
  m.report_server.reset();
  if (m.jobs) m.jobs->Stop();
  if (m.pods) m.pods->Stop();
  if (m.allocations) m.allocations->Stop();
  if (m.services) m.services->Stop();
}

bool Operator::ready() const { return impl_->started && !impl_->stopping; }
int Operator::report_port() const { return impl_->report_server ? impl_->report_server->port() : 0; }
std::string Operator::report_url() const { return impl_->report_url; }
size_t Operator::pending() const { return impl_->queue.Len(); }

Status Operator::Reconcile(const std::string& key) {
  auto r = impl_->ReconcileJob(key);
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace star::op
