#include "star/operator/reconciler/reallocation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace star::op {

using nlohmann::json;

namespace {

std::string Seconds(double s) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

const api::NodeAllocation* FindNode(const std::vector<api::NodeAllocation>& all, const std::string& node) {
  for (const auto& a : all) {
    if (a.name == node) return &a;
  }
  return nullptr;
}

// The nodes the stragglers run on, in first-seen order.
std::vector<std::string> StragglerNodes(const std::vector<StragglingPod>& stragglers) {
  std::vector<std::string> nodes;
  for (const StragglingPod& s : stragglers) {
    if (s.node.empty() || s.uid.empty()) continue;
    if (std::find(nodes.begin(), nodes.end(), s.node) == nodes.end()) nodes.push_back(s.node);
  }
  return nodes;
}

// The planner's view of the stragglers' nodes, built up node by node.
struct PlannerCluster {
  resources::ClusterState cs;
  std::set<std::string> bandwidth_limited;  // uids with a bandwidth allocation of their own
  std::map<std::string, size_t> job_index;
};

// Adds the job `key` to the cluster once, with its load where one is known.
void AddJob(const ReallocationInput& in, const std::string& key, PlannerCluster& cluster) {
  if (cluster.job_index.count(key)) return;
  resources::Job j;
  j.name = key;
  auto it = in.loads.find(key);
  if (it != in.loads.end()) {
    j.synchronous = it->second.synchronous;
    double t = 0;
    for (double w : it->second.worker_seconds) t = std::max(t, w);
    j.iteration_seconds = t > 0 ? t : 1;
    j.progress = std::clamp(it->second.progress, 0.0, 1.0);
  } else {
    j.iteration_seconds = 1;  // unknown: never idle (its pods report no time)
  }
  cluster.job_index[key] = cluster.cs.jobs.size();
  cluster.cs.jobs.push_back(std::move(j));
}

// Converts one allocated pod on `node` into the planner's pod (adding its job).
resources::Pod ToPlannerPod(const ReallocationInput& in, const api::PodAllocation& p, const std::string& node,
                            PlannerCluster& cluster) {
  resources::Pod pod;
  pod.namespace_ = p.namespace_;
  pod.name = p.name;
  pod.uid = p.uid;
  pod.node = node;
  // The planner needs a positive allocation; 0 means unlimited in a NodeAllocation.
  // An unlimited pod counts with the planner's minimum and is never changed (its
  // CPU: no job; its bandwidth: no pod asks for unlimited bandwidth).
  pod.allocation = {p.cpu.quota_millicores > 0 ? p.cpu.quota_millicores : in.planner.min_allocation.cpu_millicores,
                    p.network.egress_bits_per_second > 0 ? p.network.egress_bits_per_second
                                                         : in.planner.min_allocation.bandwidth_bps};
  auto owner = in.owners.find(p.uid);
  // A pod without a CPU limit cannot be throttled or granted: not planned.
  if (owner != in.owners.end() && p.cpu.quota_millicores > 0) {
    pod.job = owner->second.job;
    AddJob(in, pod.job, cluster);
    auto load = in.loads.find(pod.job);
    const int rank = owner->second.rank;
    if (load != in.loads.end() && rank >= 0 && rank < static_cast<int>(load->second.worker_seconds.size())) {
      pod.iteration_seconds = load->second.worker_seconds[static_cast<size_t>(rank)];
    }
  }
  pod.guaranteed = p.guaranteed && !pod.job.empty();
  if (pod.guaranteed) pod.request = pod.allocation;
  if (p.network.egress_bits_per_second > 0) cluster.bandwidth_limited.insert(p.uid);
  return pod;
}

// Adds `node` and the pods allocated on it to the cluster.
void AddNode(const ReallocationInput& in, const std::string& node, PlannerCluster& cluster) {
  const api::NodeAllocation* a = FindNode(in.allocations, node);
  resources::Node n;
  n.name = node;
  int64_t cpu_sum = 0, bps_sum = 0;
  if (a != nullptr) {
    for (const api::PodAllocation& p : a->spec.pods) {
      resources::Pod pod = ToPlannerPod(in, p, node, cluster);
      cpu_sum += pod.allocation.cpu_millicores;
      bps_sum += pod.allocation.bandwidth_bps;
      cluster.cs.pods.push_back(std::move(pod));
    }
  }
  auto cap = in.node_cpu.find(node);
  n.capacity.cpu_millicores = std::max(cap == in.node_cpu.end() ? 0 : cap->second, cpu_sum);
  n.capacity.bandwidth_bps = bps_sum;  // no free bandwidth is known
  cluster.cs.nodes.push_back(std::move(n));
}

// What the bandwidth-limited pods of other jobs on `node` can yield to a plan for
// `in.job`: their allocations above what the planner leaves them.
int64_t YieldableBandwidth(const ReallocationInput& in, const PlannerCluster& cluster, const std::string& node) {
  int64_t total = 0;
  for (const resources::Pod& p : cluster.cs.pods) {
    if (p.node != node || !resources::MayGive(p, in.job) || !cluster.bandwidth_limited.count(p.uid)) continue;
    total += std::max<int64_t>(0, p.allocation.bandwidth_bps - resources::FloorOf(p, in.planner).bandwidth_bps);
  }
  return total;
}

// The request for the stragglers' extra resources; `worst` is their largest slowdown
// (at least 1) and `asked` names each straggler that asked, in order.
resources::ReallocationRequest StragglerDemands(const ReallocationInput& in, const PlannerCluster& cluster,
                                                double& worst, std::vector<std::string>& asked) {
  resources::ReallocationRequest req;
  req.job = in.job;
  req.horizon_seconds = in.horizon_seconds;
  worst = 1;
  for (const StragglingPod& s : in.stragglers) {
    auto pod = std::find_if(cluster.cs.pods.begin(), cluster.cs.pods.end(), [&](const resources::Pod& p) {
      return p.uid == s.uid && p.job == in.job;
    });
    if (pod == cluster.cs.pods.end() || !(s.slowdown > 1)) continue;
    resources::Demand d;
    d.uid = s.uid;
    const double more = s.slowdown - 1;
    if (s.cause == api::StragglerCause::kCompute) {
      d.extra.cpu_millicores = std::llround(static_cast<double>(pod->allocation.cpu_millicores) * more);
    } else {
      // On a shared NIC (slowdown - 1) x its own allocation may be more than exists; it
      // asks for what the co-located senders can yield, up to that.
      if (cluster.bandwidth_limited.count(s.uid)) {
        d.extra.bandwidth_bps = std::min<int64_t>(std::llround(static_cast<double>(pod->allocation.bandwidth_bps) * more),
                                         YieldableBandwidth(in, cluster, pod->node));
      }
    }
    if (d.extra.cpu_millicores <= 0 && d.extra.bandwidth_bps <= 0) continue;
    worst = std::max(worst, s.slowdown);
    req.demands.push_back(d);
    asked.push_back("worker " + std::to_string(s.worker));
  }
  return req;
}

// The overrides for the pods whose allocation the plan changes.
std::map<std::string, PodOverride> ChangedPods(const resources::Plan& plan) {
  std::map<std::string, PodOverride> overrides;
  for (const resources::PodChange& c : plan.pods) {
    if (c.after == c.before) continue;
    PodOverride o;
    o.node = c.node;
    o.job = c.job;
    o.cpu_millicores = c.after.cpu_millicores;
    if (c.after.bandwidth_bps != c.before.bandwidth_bps) o.bandwidth_bps = c.after.bandwidth_bps;
    overrides[c.uid] = o;
  }
  return overrides;
}

// The Event line for an applied plan.
std::string AppliedMessage(const std::vector<std::string>& asked, const resources::Plan& p,
                           const resources::ReallocationRequest& req, double horizon_seconds) {
  std::string who;
  for (const std::string& a : asked) who += (who.empty() ? "" : ", ") + a;
  std::string message = "reallocated for " + who + ": +" + std::to_string(p.granted.cpu_millicores) +
                        "m CPU (" + std::to_string(p.from_free.cpu_millicores) + "m free, " +
                        std::to_string(p.freed_idle.cpu_millicores) + "m idle, " +
                        std::to_string(p.taken.cpu_millicores) + "m taken from other jobs)";
  if (p.granted.bandwidth_bps > 0) {
    message += ", +" + std::to_string(p.granted.bandwidth_bps / 1000) + " kbit/s";
  }
  message += "; others lose " + Seconds(p.imposed_slowdown_seconds) + " < " + Seconds(req.sync_loss_seconds) +
             " saved over " + Seconds(horizon_seconds);
  return message;
}

}  // namespace

StatusOr<ReallocationOutcome> PlanJobReallocation(const ReallocationInput& in) {
  if (!(in.horizon_seconds > 0)) return Status::InvalidArgument("horizon_seconds: must be > 0");
  if (in.workers < 1) return Status::InvalidArgument("workers: must be >= 1");
  const std::vector<std::string> nodes = StragglerNodes(in.stragglers);
  if (nodes.empty()) return Status::InvalidArgument("stragglers: none runs on a known node");

  PlannerCluster cluster;
  AddJob(in, in.job, cluster);
  for (const std::string& node : nodes) AddNode(in, node, cluster);

  double worst = 1;
  std::vector<std::string> asked;
  resources::ReallocationRequest req = StragglerDemands(in, cluster, worst, asked);
  ReallocationOutcome out;
  if (req.demands.empty()) {
    out.message = "nothing to reallocate: no straggler has a CPU limit or bandwidth allocation to raise";
    return out;
  }
  // Every worker of a synchronous job waits on the slowest: worker-seconds lost.
  req.sync_loss_seconds = in.workers * in.horizon_seconds * (1.0 - 1.0 / worst);
  STAR_ASSIGN_OR_RETURN(out.plan, resources::PlanReallocation(cluster.cs, req, in.planner));
  out.apply = out.plan.switch_recommended;
  if (!out.apply) {
    out.message = "reallocation skipped: " + out.plan.reason;
    return out;
  }
  out.overrides = ChangedPods(out.plan);
  out.message = AppliedMessage(asked, out.plan, req, in.horizon_seconds);
  return out;
}

std::string PlansToAnnotation(const JobPlans& plans, const std::string& node, const std::set<std::string>& pods) {
  json out = json::object();
  for (const auto& [job, overrides] : plans) {
    for (const auto& [uid, o] : overrides) {
      if (o.node != node || !pods.count(uid)) continue;
      out[job][uid] = {{"job", o.job}, {"cpu", o.cpu_millicores}, {"bps", o.bandwidth_bps}};
    }
  }
  return out.empty() ? "" : out.dump();
}

StatusOr<JobPlans> PlansFromAnnotation(const std::string& value, const std::string& node) {
  const std::string field = std::string("metadata.annotations[") + kReallocationPlansAnnotation + "]";
  const json j = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument(field + ": must be a JSON object");
  JobPlans out;
  for (const auto& [job, pods] : j.items()) {
    if (!pods.is_object()) return Status::InvalidArgument(field + "." + job + ": must be an object");
    for (const auto& [uid, p] : pods.items()) {
      const std::string f = field + "." + job + "." + uid;
      if (!p.is_object() || !p.contains("job") || !p["job"].is_string() || !p.contains("cpu") ||
          !p["cpu"].is_number_integer() || !p.contains("bps") || !p["bps"].is_number_integer()) {
        return Status::InvalidArgument(f + ": needs job (string), cpu and bps (integers)");
      }
      PodOverride o;
      o.node = node;
      o.job = p["job"];
      o.cpu_millicores = p["cpu"];
      o.bandwidth_bps = p["bps"];
      if (o.cpu_millicores < 0 || o.cpu_millicores > api::kMaxQuotaMillicores || o.bandwidth_bps < 0 ||
          o.bandwidth_bps > api::kMaxBitsPerSecond) {
        return Status::InvalidArgument(f + ": cpu or bps out of range");
      }
      out[job][uid] = o;
    }
  }
  return out;
}

std::map<std::string, PodOverride> FoldOverrides(
    const std::map<std::string, std::map<std::string, PodOverride>>& plans) {
  std::map<std::string, PodOverride> out;
  std::map<std::string, bool> own;  // uid -> set by its own job's plan
  for (const auto& [job, overrides] : plans) {
    for (const auto& [uid, o] : overrides) {
      const bool mine = o.job == job;
      auto it = out.find(uid);
      if (it == out.end() || (mine && !own[uid])) {
        out[uid] = o;
        own[uid] = mine;
      } else if (!mine && !own[uid]) {
        it->second.cpu_millicores = std::min(it->second.cpu_millicores, o.cpu_millicores);
        if (o.bandwidth_bps > 0) {
          it->second.bandwidth_bps = it->second.bandwidth_bps > 0
                                         ? std::min(it->second.bandwidth_bps, o.bandwidth_bps)
                                         : o.bandwidth_bps;
        }
      }
    }
  }
  return out;
}

std::vector<api::PodAllocation> ApplyOverrides(std::vector<api::PodAllocation> pods,
                                               const std::map<std::string, PodOverride>& overrides,
                                               const std::string& node) {
  for (api::PodAllocation& p : pods) {
    auto it = overrides.find(p.uid);
    if (it == overrides.end() || it->second.node != node) continue;
    p.cpu.quota_millicores = it->second.cpu_millicores;
    if (it->second.bandwidth_bps > 0) {
      p.network.egress_bits_per_second = it->second.bandwidth_bps;
      // Ingress moves with the plan only where the pod limits it: an unlimited ingress
      // was never planned, and is not to be limited by a plan for egress.
      if (p.network.ingress_bits_per_second > 0) p.network.ingress_bits_per_second = it->second.bandwidth_bps;
    }
  }
  return pods;
}

}  // namespace star::op
