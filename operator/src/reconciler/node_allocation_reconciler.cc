#include "star/operator/reconciler/node_allocation_reconciler.h"

#include "reconciler/helpers.h"
#include "star/kube/informer.h"
#include "star/operator/reconciler/job_objects.h"

namespace star::op {

using nlohmann::json;

namespace {

constexpr char kNodeKeyPrefix[] = "node:";

}  // namespace

NodeAllocationReconciler::NodeAllocationReconciler(Manager* manager)
    : manager_(manager), ns_(manager->options().ns) {
  manager->cache().AddHandler(Kind::kNodeAllocation,
                              [this](const std::string& type, const json& na) { OnAllocation(type, na); });
  manager->AddController("nodeallocation", Owns, this);
}

bool NodeAllocationReconciler::Owns(const std::string& key) { return key.rfind(kNodeKeyPrefix, 0) == 0; }

std::string NodeAllocationReconciler::KeyOf(const std::string& node) { return kNodeKeyPrefix + node; }

void NodeAllocationReconciler::OnAllocation(const std::string& type, const json& na) {
  const std::string node = na["metadata"].value("name", "");
  std::set<std::string> now;
  if (type != "DELETED") {
    for (const json& p : na.value("spec", json::object()).value("pods", json::array())) {
      const std::string ns = p.value("namespace", "");
      if (!ns_.empty() && ns != ns_) continue;  // the operator watching ns has them
      if (auto job = JobOfPodName(p.value("name", ""))) now.insert(ns + "/" + *job);
    }
  }
  std::lock_guard lock(mu_);
  // Reconciled: entries of a job that no longer exists are removed there.
  for (const std::string& job : now) {
    if (!node_jobs_[node].count(job)) manager_->Enqueue(job);
  }
  for (const std::string& job : node_jobs_[node]) {
    if (now.count(job)) continue;
    manager_->Enqueue(job);  // its entries left this node: a finalizer may be waiting for that
    auto it = job_nodes_.find(job);
    if (it == job_nodes_.end()) continue;
    it->second.erase(node);
    if (it->second.empty()) job_nodes_.erase(it);
  }
  for (const std::string& job : now) job_nodes_[job].insert(node);
  if (now.empty()) {
    node_jobs_.erase(node);
  } else {
    node_jobs_[node] = std::move(now);
  }
}

void NodeAllocationReconciler::SetJobWants(const std::string& job,
                                           std::map<std::string, std::vector<api::PodAllocation>> by_node) {
  std::vector<std::string> changed;
  {
    std::lock_guard lock(mu_);
    std::set<std::string> nodes;
    for (const auto& [node, _] : by_node) nodes.insert(node);
    auto listed = job_nodes_.find(job);
    if (listed != job_nodes_.end()) nodes.insert(listed->second.begin(), listed->second.end());
    for (const std::string& node : nodes) {
      std::vector<api::PodAllocation> mine = by_node.count(node) ? by_node[node] : std::vector<api::PodAllocation>{};
      auto& wants = node_wants_[node];
      auto it = wants.find(job);
      if (it != wants.end() && it->second == mine) continue;
      wants[job] = std::move(mine);
      changed.push_back(node);
    }
  }
  for (const std::string& node : changed) manager_->Enqueue(KeyOf(node));
}

void NodeAllocationReconciler::SetPlan(const std::string& job, const std::map<std::string, PodOverride>& plan) {
  std::set<std::string> affected;
  {
    std::lock_guard lock(mu_);
    auto it = plans_.find(job);
    const bool had = it != plans_.end();
    if ((had ? it->second : std::map<std::string, PodOverride>{}) == plan) return;
    if (had) {
      for (const auto& [uid, o] : it->second) affected.insert(KeyOf(o.node));
    }
    for (const auto& [uid, o] : plan) affected.insert(KeyOf(o.node));
    if (plan.empty()) {
      plans_.erase(job);
    } else {
      plans_[job] = plan;
    }
    folded_ = FoldOverrides(plans_);
  }
  for (const std::string& node : affected) manager_->Enqueue(node);
}

bool NodeAllocationReconciler::Lists(const std::string& job) const {
  std::lock_guard lock(mu_);
  return job_nodes_.count(job) > 0;
}

bool NodeAllocationReconciler::HasPlan(const std::string& job) const {
  std::lock_guard lock(mu_);
  return plans_.count(job) > 0;
}

bool NodeAllocationReconciler::InScope(const std::string& job) const {
  return ns_.empty() || job.rfind(ns_ + "/", 0) == 0;
}

namespace {

// The plans kept in NodeAllocation `na`'s annotation; none when absent or malformed.
JobPlans StoredPlans(const json& na) {
  const json annotations = na["metadata"].value("annotations", json::object());
  const auto it = annotations.find(kReallocationPlansAnnotation);
  if (it == annotations.end() || !it->is_string()) return {};
  auto plans = PlansFromAnnotation(it->get<std::string>(), na["metadata"].value("name", ""));
  if (!plans.ok()) {
    Log("NodeAllocation " + na["metadata"].value("name", "") + ": " + plans.status().message() + " (ignored)");
    return {};
  }
  return *std::move(plans);
}

}  // namespace

std::map<std::string, PodOverride> NodeAllocationReconciler::StoredPlan(const std::string& job) const {
  std::set<std::string> nodes;
  {
    std::lock_guard lock(mu_);
    auto it = job_nodes_.find(job);
    if (it != job_nodes_.end()) nodes = it->second;
  }
  std::map<std::string, PodOverride> plan;
  for (const std::string& node : nodes) {
    const auto na = manager_->cache().Get(Kind::kNodeAllocation, node);
    if (!na) continue;
    const JobPlans stored = StoredPlans(*na);
    const auto mine = stored.find(job);
    if (mine == stored.end()) continue;
    for (const json& entry : (*na)["spec"].value("pods", json::array())) {
      const std::string uid = entry.value("uid", "");
      const auto o = mine->second.find(uid);
      if (o == mine->second.end()) continue;
      const auto pod =
          manager_->cache().Get(Kind::kPod, entry.value("namespace", "") + "/" + entry.value("name", ""));
      if (!pod || !IsStarPod(*pod) || (*pod)["metadata"].value("uid", "") != uid) continue;
      plan[uid] = o->second;
    }
  }
  return plan;
}

StatusOr<std::chrono::milliseconds> NodeAllocationReconciler::Reconcile(const std::string& key) {
  const std::string node = key.substr(sizeof kNodeKeyPrefix - 1);
  Desired d;
  {
    std::lock_guard lock(mu_);
    auto it = node_wants_.find(node);
    if (it == node_wants_.end()) return std::chrono::milliseconds(0);
    d.wants = it->second;
    d.plans = plans_;
    d.overrides = folded_;
  }
  bool first = true;
  STAR_RETURN_IF_ERROR(kube::RetryOnConflict([&]() -> Status {
    Status s = WriteOnce(node, d, first);
    first = false;
    return s;
  }));
  Settle(node, d.wants);
  return std::chrono::milliseconds(0);
}

api::NodeAllocationSpec NodeAllocationReconciler::Merge(const api::NodeAllocationSpec& current,
                                                        const std::string& node, const Desired& d) const {
  api::NodeAllocationSpec merged = current;
  for (const auto& [job, mine] : d.wants) {
    const auto slash = job.find('/');
    // `mine` holds only the job's own pods on this node: overrides reach no other pod.
    merged = MergeJobAllocations(merged, job.substr(0, slash), job.substr(slash + 1),
                                 ApplyOverrides(mine, d.overrides, node));
  }
  return merged;
}

std::string NodeAllocationReconciler::PlansAnnotation(const json& current, const std::string& node,
                                                      const api::NodeAllocationSpec& merged,
                                                      const JobPlans& plans) const {
  JobPlans all;
  for (auto& [job, overrides] : StoredPlans(current)) {
    if (!InScope(job)) all[job] = std::move(overrides);  // another operator's
  }
  for (const auto& [job, overrides] : plans) all[job] = overrides;
  std::set<std::string> uids;
  for (const api::PodAllocation& p : merged.pods) uids.insert(p.uid);
  return PlansToAnnotation(all, node, uids);
}

// One attempt: the cached object first (`from_cache`), else a fresh read; created when
// absent, updated when different.
Status NodeAllocationReconciler::WriteOnce(const std::string& node, const Desired& d, bool from_cache) {
  kube::Client* client = manager_->client();
  std::optional<json> current = from_cache ? manager_->cache().Get(Kind::kNodeAllocation, node) : std::nullopt;
  if (!current) {
    auto fresh = client->Get(kube::NodeAllocations(), "", node);
    if (!fresh.ok() && fresh.status().code() != StatusCode::kNotFound) return fresh.status();
    if (fresh.ok()) current = std::move(*fresh);
  }
  if (!current) {
    api::NodeAllocation a;
    a.name = node;
    a.spec = Merge({}, node, d);
    if (a.spec.pods.empty()) return Status::Ok();
    json object = api::ToJson(a);
    const std::string plans = PlansAnnotation(json{{"metadata", json::object()}}, node, a.spec, d.plans);
    if (!plans.empty()) object["metadata"]["annotations"] = {{kReallocationPlansAnnotation, plans}};
    auto created = client->Create(kube::NodeAllocations(), "", object);
    if (!created.ok() && created.status().code() == StatusCode::kAlreadyExists) {
      return Status::Aborted("NodeAllocation " + node + " appeared");
    }
    return created.status();
  }
  auto spec = api::NodeAllocationSpecFromJson((*current)["spec"]);
  if (!spec.ok()) return spec.status().WithPrefix("NodeAllocation " + node);
  const api::NodeAllocationSpec merged = Merge(*spec, node, d);
  const std::string plans = PlansAnnotation(*current, node, merged, d.plans);
  json annotations = (*current)["metadata"].value("annotations", json::object());
  const json old_plans = annotations.value(kReallocationPlansAnnotation, json(""));
  if (merged == *spec && old_plans == plans) return Status::Ok();
  if (plans.empty()) {
    annotations.erase(kReallocationPlansAnnotation);
  } else {
    annotations[kReallocationPlansAnnotation] = plans;
  }
  json updated = *current;
  updated["spec"] = api::ToJson(merged);
  updated["metadata"]["annotations"] = std::move(annotations);
  return client->Update(kube::NodeAllocations(), "", updated).status();
}

// After a write of `written`: wants met are dropped (removals) or indexed at once,
// before the informer sees the write, so that a deletion right after finds this node.
// Wants changed meanwhile stay: their key is queued again.
void NodeAllocationReconciler::Settle(const std::string& node, const Wants& written) {
  std::lock_guard lock(mu_);
  auto it = node_wants_.find(node);
  if (it == node_wants_.end()) return;
  for (const auto& [job, mine] : written) {
    auto w = it->second.find(job);
    if (w == it->second.end() || w->second != mine) continue;
    if (mine.empty()) {
      it->second.erase(w);
    } else {
      job_nodes_[job].insert(node);
      node_jobs_[node].insert(job);
    }
  }
  if (it->second.empty()) node_wants_.erase(it);
}

}  // namespace star::op
