#include "reconciler/reallocator.h"

#include <set>

#include "reconciler/helpers.h"
#include "star/kube/informer.h"

namespace star::op {

using nlohmann::json;

std::map<std::string, PodOverride> Reallocator::StoredPlanOf(const json& job, const NodeAllocationReconciler& nodes) {
  const json& meta = job["metadata"];
  if (meta.contains("deletionTimestamp")) return {};
  return nodes.StoredPlan(kube::KeyOf(job));
}

Status Reallocator::Reallocate(json* job, const std::string& key, const api::TrainingJobSpec& spec,
                               const PhaseDecision& d, const std::map<std::string, json>& observed) {
  const bool has = nodes_->HasPlan(key);
  const auto snap = registry_->Snapshot(key);
  const ReallocationStep step =
      NextReallocationStep(api::MitigationsInForce(spec).mitigation.resource_reallocation.enabled, d.phase,
                           snap, has, Acted(key));
  switch (step) {
    case ReallocationStep::kUndo: STAR_RETURN_IF_ERROR(Undo(*job, key, d)); break;
    case ReallocationStep::kPlan: STAR_RETURN_IF_ERROR(Plan(*job, key, *snap, observed)); break;
    case ReallocationStep::kNone: return Status::Ok();
  }
  // Acted on once it is written (a planner's refusal included); a failed write is retried.
  if (snap) {
    std::lock_guard lock(mu_);
    acted_[key] = {snap->loop, snap->needs.revision};
  }
  return Status::Ok();
}

void Reallocator::Forget(const std::string& key) {
  std::lock_guard lock(mu_);
  acted_.erase(key);
}

std::optional<NeedsRevision> Reallocator::Acted(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = acted_.find(key);
  if (it == acted_.end()) return std::nullopt;
  return it->second;
}

Status Reallocator::Undo(const json& job, const std::string& key, const PhaseDecision& d) {
  nodes_->SetPlan(key, {});
  manager_->metrics()->Reallocation(key, "undone");
  manager_->metrics()->PlannedAllocations(key, {});
  events_->Emit(job, {"Normal", "ReallocationUndone",
                       std::string(d.phase == api::JobPhase::kRunning ? "no worker needs resources any more"
                                                                     : "job not running") +
                           ": the allocations from before the plan are restored"});
  return Status::Ok();
}

Status Reallocator::Plan(const json& job, const std::string& key, const JobSnapshot& snap,
                         const std::map<std::string, json>& observed) {
  const ReallocationInput in = InputFor(key, snap, observed);
  auto out = PlanJobReallocation(in);
  OperatorMetrics* metrics = manager_->metrics();
  if (!out.ok()) {
    // The snapshot's problem may name pods of other namespaces: logged, not shown.
    Log("trainingjob " + key + ": reallocation skipped: " + out.status().message());
    events_->Emit(job, {"Warning", "ReallocationSkipped", "reallocation skipped: the nodes' allocations are "
                                                          "inconsistent (see the operator's log)"});
    metrics->Reallocation(key, "error");
    registry_->NoteUnmetNeeds(key, snap);
    return Status::Ok();
  }
  if (!out->apply) {
    events_->Emit(job, {"Normal", "ReallocationSkipped", out->message});
    metrics->Reallocation(key, "skipped");
    registry_->NoteUnmetNeeds(key, snap);  // its communication stragglers are the mode's now
    return Status::Ok();
  }
  // Kept with the allocations it produces, in the same NodeAllocation writes.
  nodes_->SetPlan(key, out->overrides);
  events_->Emit(job, {"Normal", "Reallocated", out->message});
  metrics->Reallocation(key, "applied");
  metrics->PlannedAllocations(key, PlannedPodsOf(in, out->overrides));
  return Status::Ok();
}

std::vector<PlannedPod> Reallocator::PlannedPodsOf(const ReallocationInput& in,
                                           const std::map<std::string, PodOverride>& overrides) {
  std::map<std::string, std::string> names;  // uid -> "<namespace>/<name>"
  for (const api::NodeAllocation& a : in.allocations) {
    for (const api::PodAllocation& p : a.spec.pods) names[p.uid] = p.namespace_ + "/" + p.name;
  }
  std::vector<PlannedPod> out;
  for (const auto& [uid, o] : overrides) {
    auto it = names.find(uid);
    out.push_back({it != names.end() ? it->second : uid, o.node, o.cpu_millicores, o.bandwidth_bps});
  }
  return out;
}

// The pods of the workers that need resources, and the NodeAllocations and allocatable CPU of their nodes.
ReallocationInput Reallocator::InputFor(const std::string& key, const JobSnapshot& snap,
                                        const std::map<std::string, json>& observed) {
  ReallocationInput in;
  in.job = key;
  in.workers = snap.workers;
  for (const ResourceNeed& need : snap.needs.workers) {
    for (const auto& [pod_name, pod] : observed) {
      if (WorkerRank(pod) != need.worker) continue;
      in.stragglers.push_back({pod["metadata"].value("uid", ""), pod.value("spec", json::object()).value("nodeName", ""),
                               need.worker, need.cause, need.slowdown});
    }
  }
  std::set<std::string> nodes;
  for (const StragglingPod& p : in.stragglers) {
    if (!p.node.empty()) nodes.insert(p.node);
  }
  for (const std::string& node : nodes) AddNode(node, &in);
  return in;
}

// The node's CPU, its NodeAllocation, and the owner and load of every STAR pod there.
void Reallocator::AddNode(const std::string& node, ReallocationInput* in) {
  if (auto cpu = NodeCpu(node)) in->node_cpu[node] = *cpu;
  auto cached = manager_->cache().Get(Kind::kNodeAllocation, node);
  if (!cached) return;
  auto a = api::NodeAllocationFromJson(*cached);
  if (!a.ok()) {  // planned without it: the planner then says what is missing
    Log("NodeAllocation " + node + ": " + a.status().message());
    return;
  }
  for (const api::PodAllocation& p : a->spec.pods) {
    auto pod = manager_->cache().Get(Kind::kPod, p.namespace_ + "/" + p.name);
    if (!pod) continue;
    // Only pods STAR made count as a job's; a labelled look-alike is nobody's.
    if (!IsStarPod(*pod) || (*pod)["metadata"].value("uid", "") != p.uid) continue;
    PodOwner owner;
    owner.job = p.namespace_ + "/" + (*pod)["metadata"]["labels"].value(kJobLabel, "");
    owner.rank = WorkerRank(*pod);
    if (!in->loads.count(owner.job)) {
      if (auto other = registry_->Snapshot(owner.job)) in->loads[owner.job] = other->load;
    }
    in->owners[p.uid] = owner;
  }
  in->allocations.push_back(std::move(*a));
}

// Allocatable CPU of a node in millicores (nullopt unknown).
std::optional<int64_t> Reallocator::NodeCpu(const std::string& node) {
  auto n = manager_->client()->Get({"", "v1", "nodes", false, "Node"}, "", node);
  if (!n.ok()) return std::nullopt;
  const json alloc = n->value("status", json::object()).value("allocatable", json::object());
  if (!alloc.contains("cpu")) return std::nullopt;
  return api::ParseCpuMillicores(alloc["cpu"]);
}

}  // namespace star::op
