#include "star/core/resources/planner.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

namespace star::resources {

namespace {

constexpr int kResources = 2;  // 0: cpu millicores, 1: bandwidth bps
constexpr const char* kResourceField[kResources] = {"cpu_millicores", "bandwidth_bps"};
constexpr const char* kResourceName[kResources] = {"cpu", "bandwidth"};

int64_t& At(Resources& r, int k) { return k == 0 ? r.cpu_millicores : r.bandwidth_bps; }
int64_t At(const Resources& r, int k) { return k == 0 ? r.cpu_millicores : r.bandwidth_bps; }

std::string Num(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string Idx(const char* path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

Status CheckResources(const Resources& r, const std::string& path, int64_t min) {
  for (int k = 0; k < kResources; ++k) {
    if (At(r, k) < min) {
      return Status::InvalidArgument(path + "." + kResourceField[k] + ": must be >= " +
                                     std::to_string(min) + ", got " + std::to_string(At(r, k)));
    }
  }
  return Status();
}

Status CheckNumber(double v, const std::string& field, double min, bool strict) {
  if (!std::isfinite(v)) return Status::InvalidArgument(field + ": must be a finite number");
  if (strict ? !(v > min) : !(v >= min)) {
    return Status::InvalidArgument(field + ": must be " + (strict ? "> " : ">= ") + Num(min) +
                                   ", got " + Num(v));
  }
  return Status();
}

// Splits `total` units among items in proportion to `weights`, no item above its cap
// (water-filling: capped items are filled, the rest share what remains). Returns
// amounts summing to min(total, sum caps); rounding leftovers go in input order.
std::vector<int64_t> Proportional(int64_t total, const std::vector<double>& weights,
                                  const std::vector<int64_t>& caps) {
  const size_t n = caps.size();
  std::vector<int64_t> out(n, 0);
  int64_t cap_sum = 0;
  for (size_t i = 0; i < n; ++i) {
    if (weights[i] > 0) cap_sum += caps[i];
  }
  int64_t target = std::min(total, cap_sum);
  if (target <= 0) return out;
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (weights[i] > 0 && caps[i] > 0) order.push_back(i);
  }
  // Items that saturate first: smallest cap per unit of weight.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    double ra = static_cast<double>(caps[a]) / weights[a];
    double rb = static_cast<double>(caps[b]) / weights[b];
    return ra != rb ? ra < rb : a < b;
  });
  double remaining = static_cast<double>(target);
  double weight_left = 0;
  for (size_t i : order) weight_left += weights[i];
  size_t k = 0;
  for (; k < order.size(); ++k) {
    size_t i = order[k];
    double share = remaining * weights[i] / weight_left;
    if (static_cast<double>(caps[i]) > share) break;
    out[i] = caps[i];
    remaining -= static_cast<double>(caps[i]);
    weight_left -= weights[i];
  }
  for (size_t j = k; j < order.size(); ++j) {
    size_t i = order[j];
    double share = weight_left > 0 ? remaining * weights[i] / weight_left : 0;
    out[i] = std::clamp<int64_t>(static_cast<int64_t>(std::floor(share)), 0, caps[i]);
  }
  int64_t sum = std::accumulate(out.begin(), out.end(), int64_t{0});
  // Rounding: hand out (or take back) single units in input order until exact.
  for (size_t i = 0; sum < target; i = (i + 1) % n) {
    if (weights[i] > 0 && out[i] < caps[i]) ++out[i], ++sum;
  }
  for (size_t i = n; sum > target;) {
    i = (i == 0 ? n : i) - 1;
    if (out[i] > 0) --out[i], --sum;
  }
  return out;
}

api::PodAllocation ToPodAllocation(const PodChange& c) {
  api::PodAllocation a;
  a.namespace_ = c.namespace_;
  a.name = c.name;
  a.uid = c.uid;
  a.cpu.quota_millicores = c.after.cpu_millicores;
  a.cpu.weight = CpuWeight(c.after.cpu_millicores);
  a.network.egress_bits_per_second = c.after.bandwidth_bps;
  a.network.ingress_bits_per_second = c.after.bandwidth_bps;
  a.guaranteed = c.guaranteed;
  return a;
}

// Unmanaged pods (no job) are not listed: STAR does not set their limits.
std::vector<api::NodeAllocation> BuildAllocations(const std::vector<std::string>& nodes,
                                                  const std::vector<PodChange>& pods) {
  std::vector<api::NodeAllocation> out(nodes.size());
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) {
    out[i].name = nodes[i];
    index.emplace(nodes[i], i);
  }
  for (const PodChange& c : pods) {
    if (c.job.empty()) continue;
    auto it = index.find(c.node);
    if (it != index.end()) out[it->second].spec.pods.push_back(ToPodAllocation(c));
  }
  return out;
}

Resources Sum(const Resources& a, const Resources& b) {
  return {a.cpu_millicores + b.cpu_millicores, a.bandwidth_bps + b.bandwidth_bps};
}

}  // namespace

int64_t CpuWeight(int64_t millicores) {
  constexpr int64_t kMinShares = 2, kMaxShares = 262144;
  int64_t shares = std::clamp<int64_t>(millicores * 1024 / 1000, kMinShares, kMaxShares);
  return 1 + ((shares - 2) * 9999) / 262142;
}

Status Validate(const PlannerOptions& o) {
  STAR_RETURN_IF_ERROR(CheckResources(o.min_allocation, "min_allocation", 1));
  return CheckNumber(o.progress_penalty, "progress_penalty", 0, false);
}

Status Validate(const ClusterState& s) {
  std::unordered_map<std::string, size_t> nodes, jobs;
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const Node& n = s.nodes[i];
    std::string path = Idx("nodes", i);
    if (n.name.empty()) return Status::InvalidArgument(path + ".name: must not be empty");
    if (!nodes.emplace(n.name, i).second) {
      return Status::InvalidArgument(path + ".name: duplicate \"" + n.name + "\"");
    }
    STAR_RETURN_IF_ERROR(CheckResources(n.capacity, path + ".capacity", 0));
  }
  for (size_t i = 0; i < s.jobs.size(); ++i) {
    const Job& j = s.jobs[i];
    std::string path = Idx("jobs", i);
    if (j.name.empty()) return Status::InvalidArgument(path + ".name: must not be empty");
    if (!jobs.emplace(j.name, i).second) {
      return Status::InvalidArgument(path + ".name: duplicate \"" + j.name + "\"");
    }
    STAR_RETURN_IF_ERROR(CheckNumber(j.iteration_seconds, path + ".iteration_seconds", 0, true));
    STAR_RETURN_IF_ERROR(CheckNumber(j.cpu_sensitivity, path + ".cpu_sensitivity", 0, true));
    STAR_RETURN_IF_ERROR(
        CheckNumber(j.bandwidth_sensitivity, path + ".bandwidth_sensitivity", 0, true));
    STAR_RETURN_IF_ERROR(CheckNumber(j.progress, path + ".progress", 0, false));
    if (j.progress > 1) {
      return Status::InvalidArgument(path + ".progress: must be <= 1, got " + Num(j.progress));
    }
  }
  std::unordered_set<std::string> uids;
  std::vector<Resources> used(s.nodes.size());
  for (size_t i = 0; i < s.pods.size(); ++i) {
    const Pod& p = s.pods[i];
    std::string path = Idx("pods", i);
    if (p.uid.empty()) return Status::InvalidArgument(path + ".uid: must not be empty");
    if (!uids.insert(p.uid).second) {
      return Status::InvalidArgument(path + ".uid: duplicate \"" + p.uid + "\"");
    }
    auto node = nodes.find(p.node);
    if (node == nodes.end()) {
      return Status::InvalidArgument(path + ".node: unknown node \"" + p.node + "\"");
    }
    if (!p.job.empty() && jobs.find(p.job) == jobs.end()) {
      return Status::InvalidArgument(path + ".job: unknown job \"" + p.job + "\"");
    }
    STAR_RETURN_IF_ERROR(CheckResources(p.request, path + ".request", 0));
    // 0 would mean "unlimited" in a NodeAllocation.
    STAR_RETURN_IF_ERROR(CheckResources(p.allocation, path + ".allocation", 1));
    for (int k = 0; k < kResources && p.guaranteed; ++k) {
      if (At(p.allocation, k) < At(p.request, k)) {
        return Status::InvalidArgument(
            path + ".allocation." + kResourceField[k] + ": guaranteed pod must have at least its request (" +
            std::to_string(At(p.request, k)) + "), got " + std::to_string(At(p.allocation, k)));
      }
    }
    STAR_RETURN_IF_ERROR(CheckNumber(p.iteration_seconds, path + ".iteration_seconds", 0, false));
    used[node->second] = Sum(used[node->second], p.allocation);
  }
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    for (int k = 0; k < kResources; ++k) {
      if (At(used[i], k) > At(s.nodes[i].capacity, k)) {
        return Status::InvalidArgument(Idx("nodes", i) + ": allocations exceed capacity (" +
                                       kResourceName[k] + " " + std::to_string(At(used[i], k)) +
                                       " > " + std::to_string(At(s.nodes[i].capacity, k)) + ")");
      }
    }
  }
  return Status();
}

Status Validate(const ClusterState& s, const ReallocationRequest& r) {
  STAR_RETURN_IF_ERROR(Validate(s));
  if (std::none_of(s.jobs.begin(), s.jobs.end(), [&](const Job& j) { return j.name == r.job; })) {
    return Status::InvalidArgument("job: unknown job \"" + r.job + "\"");
  }
  std::unordered_map<std::string, const Pod*> pods;
  for (const Pod& p : s.pods) pods.emplace(p.uid, &p);
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < r.demands.size(); ++i) {
    const Demand& d = r.demands[i];
    std::string path = Idx("demands", i);
    auto it = pods.find(d.uid);
    if (it == pods.end()) return Status::InvalidArgument(path + ".uid: unknown pod \"" + d.uid + "\"");
    if (it->second->job != r.job) {
      return Status::InvalidArgument(path + ".uid: pod \"" + d.uid + "\" belongs to job \"" +
                                     it->second->job + "\", not \"" + r.job + "\"");
    }
    if (!seen.insert(d.uid).second) {
      return Status::InvalidArgument(path + ".uid: duplicate \"" + d.uid + "\"");
    }
    STAR_RETURN_IF_ERROR(CheckResources(d.extra, path + ".extra", 0));
  }
  STAR_RETURN_IF_ERROR(CheckNumber(r.sync_loss_seconds, "sync_loss_seconds", 0, false));
  return CheckNumber(r.horizon_seconds, "horizon_seconds", 0, true);
}

Resources FloorOf(const Pod& p, const PlannerOptions& options) {
  const Resources none{0, 0};
  const Resources& r = p.guaranteed ? p.request : none;
  return {std::max(options.min_allocation.cpu_millicores, r.cpu_millicores),
          std::max(options.min_allocation.bandwidth_bps, r.bandwidth_bps)};
}

bool MayGive(const Pod& p, const std::string& job) { return !p.job.empty() && p.job != job; }

namespace {

// One PlanReallocation over a state and request already validated: the indexes, each
// node's pods and use, and the plan being built. Borrows its arguments.
class Planner {
 public:
  Planner(const ClusterState& s, const ReallocationRequest& r, const PlannerOptions& o);

  Plan Run();

 private:
  // What a pod keeps of resource k whatever happens.
  int64_t FloorOf(const Pod& p, int k) const { return At(resources::FloorOf(p, o_), k); }
  // A pod STAR may throttle: managed, not the requester's.
  bool Donor(const Pod& p) const { return MayGive(p, r_.job); }

  void StartPlan();
  // Covers the demand for resource k on node n (steps 0-2), then hands it out.
  void PlanResource(size_t n, int k);
  // Step 1: idle share of workers of co-located SSGD jobs, at no cost.
  std::vector<int64_t> FreeIdle(const std::vector<size_t>& pods, int k, int64_t need) const;
  // Step 2: take from co-located jobs by weight (1/S_j) / (1 + penalty * progress_j),
  // split inside a job by what each of its pods can still give.
  std::vector<int64_t> TakeFromJobs(const std::vector<size_t>& pods, int k,
                                    const std::vector<int64_t>& freed, int64_t need) const;
  // Hand out to the requester's pods (in proportion to their demand when short).
  std::vector<int64_t> Grant(const std::vector<size_t>& pods, int k, int64_t available) const;
  void SettleTotals();
  void AddImposedSlowdown();
  void Decide();

  const ClusterState& s_;
  const ReallocationRequest& r_;
  const PlannerOptions& o_;
  std::unordered_map<std::string, size_t> node_index_, job_index_, pod_index_;
  std::vector<std::vector<size_t>> on_node_;
  std::vector<Resources> used_;
  std::vector<Resources> extra_;
  Plan plan_;
};

Planner::Planner(const ClusterState& s, const ReallocationRequest& r, const PlannerOptions& o)
    : s_(s), r_(r), o_(o), on_node_(s.nodes.size()), used_(s.nodes.size()),
      extra_(s.pods.size()) {
  for (size_t i = 0; i < s.nodes.size(); ++i) node_index_.emplace(s.nodes[i].name, i);
  for (size_t i = 0; i < s.jobs.size(); ++i) job_index_.emplace(s.jobs[i].name, i);
  for (size_t i = 0; i < s.pods.size(); ++i) pod_index_.emplace(s.pods[i].uid, i);
}

Plan Planner::Run() {
  StartPlan();
  for (size_t n = 0; n < s_.nodes.size(); ++n) {
    for (int k = 0; k < kResources; ++k) PlanResource(n, k);
  }
  SettleTotals();
  AddImposedSlowdown();
  Decide();
  std::vector<std::string> names;
  for (const Node& n : s_.nodes) names.push_back(n.name);
  plan_.allocations = BuildAllocations(names, plan_.pods);
  return std::move(plan_);
}

void Planner::StartPlan() {
  plan_.pods.resize(s_.pods.size());
  for (size_t i = 0; i < s_.pods.size(); ++i) {
    const Pod& p = s_.pods[i];
    PodChange& c = plan_.pods[i];
    c.namespace_ = p.namespace_, c.name = p.name, c.uid = p.uid, c.node = p.node, c.job = p.job;
    c.guaranteed = p.guaranteed, c.request = p.request, c.before = p.allocation;
    size_t n = node_index_.at(p.node);
    on_node_[n].push_back(i);
    used_[n] = Sum(used_[n], p.allocation);
  }
  for (const Demand& d : r_.demands) {
    extra_[pod_index_.at(d.uid)] = d.extra;
    plan_.wanted = Sum(plan_.wanted, d.extra);
  }
}

void Planner::PlanResource(size_t n, int k) {
  const std::vector<size_t>& pods = on_node_[n];
  int64_t want = 0;
  for (size_t i : pods) want += At(extra_[i], k);
  if (want == 0) return;
  // Step 0: unallocated capacity.
  int64_t from_free = std::min(want, At(s_.nodes[n].capacity, k) - At(used_[n], k));
  int64_t need = want - from_free;
  std::vector<int64_t> freed = FreeIdle(pods, k, need);
  int64_t freed_sum = std::accumulate(freed.begin(), freed.end(), int64_t{0});
  need -= freed_sum;
  std::vector<int64_t> taken =
      need > 0 ? TakeFromJobs(pods, k, freed, need) : std::vector<int64_t>(pods.size(), 0);
  int64_t taken_sum = std::accumulate(taken.begin(), taken.end(), int64_t{0});
  int64_t available = from_free + freed_sum + taken_sum;
  std::vector<int64_t> granted = Grant(pods, k, available);
  for (size_t x = 0; x < pods.size(); ++x) {
    PodChange& c = plan_.pods[pods[x]];
    At(c.freed_idle, k) = freed[x];
    At(c.taken, k) = taken[x];
    At(c.granted, k) = granted[x];
  }
  At(plan_.from_free, k) += from_free;
  At(plan_.freed_idle, k) += freed_sum;
  At(plan_.taken, k) += taken_sum;
  At(plan_.granted, k) += available;
}

std::vector<int64_t> Planner::FreeIdle(const std::vector<size_t>& pods, int k,
                                       int64_t need) const {
  std::vector<double> weights(pods.size(), 0);
  std::vector<int64_t> caps(pods.size(), 0);
  for (size_t x = 0; x < pods.size(); ++x) {
    const Pod& p = s_.pods[pods[x]];
    if (!Donor(p)) continue;
    const Job& j = s_.jobs[job_index_.at(p.job)];
    if (!j.synchronous || p.iteration_seconds <= 0 || p.iteration_seconds >= j.iteration_seconds) {
      continue;
    }
    double idle = (j.iteration_seconds - p.iteration_seconds) / j.iteration_seconds;
    auto amount = static_cast<int64_t>(std::floor(static_cast<double>(At(p.allocation, k)) * idle));
    caps[x] = std::clamp<int64_t>(amount, 0, std::max<int64_t>(0, At(p.allocation, k) - FloorOf(p, k)));
    weights[x] = static_cast<double>(caps[x]);
  }
  return Proportional(need, weights, caps);
}

std::vector<int64_t> Planner::TakeFromJobs(const std::vector<size_t>& pods, int k,
                                           const std::vector<int64_t>& freed,
                                           int64_t need) const {
  std::vector<int64_t> caps(pods.size(), 0);
  std::map<size_t, std::vector<size_t>> by_job;  // job index -> positions in `pods`
  for (size_t x = 0; x < pods.size(); ++x) {
    const Pod& p = s_.pods[pods[x]];
    if (!Donor(p)) continue;
    caps[x] = std::max<int64_t>(0, At(p.allocation, k) - freed[x] - FloorOf(p, k));
    if (caps[x] > 0) by_job[job_index_.at(p.job)].push_back(x);
  }
  std::vector<double> job_weight;
  std::vector<int64_t> job_cap;
  for (const auto& [j, xs] : by_job) {
    const Job& job = s_.jobs[j];
    double sensitivity = k == 0 ? job.cpu_sensitivity : job.bandwidth_sensitivity;
    job_weight.push_back(1 / sensitivity / (1 + o_.progress_penalty * job.progress));
    int64_t cap = 0;
    for (size_t x : xs) cap += caps[x];
    job_cap.push_back(cap);
  }
  std::vector<int64_t> share = Proportional(need, job_weight, job_cap);
  std::vector<int64_t> taken(pods.size(), 0);
  size_t jx = 0;
  for (const auto& [j, xs] : by_job) {
    std::vector<double> w;
    std::vector<int64_t> c;
    for (size_t x : xs) w.push_back(static_cast<double>(caps[x])), c.push_back(caps[x]);
    std::vector<int64_t> got = Proportional(share[jx++], w, c);
    for (size_t y = 0; y < xs.size(); ++y) taken[xs[y]] = got[y];
  }
  return taken;
}

std::vector<int64_t> Planner::Grant(const std::vector<size_t>& pods, int k,
                                    int64_t available) const {
  std::vector<double> demand_w(pods.size());
  std::vector<int64_t> demand_c(pods.size());
  for (size_t x = 0; x < pods.size(); ++x) {
    demand_c[x] = At(extra_[pods[x]], k);
    demand_w[x] = static_cast<double>(demand_c[x]);
  }
  return Proportional(available, demand_w, demand_c);
}

void Planner::SettleTotals() {
  for (PodChange& c : plan_.pods) {
    for (int k = 0; k < kResources; ++k) {
      At(c.after, k) = At(c.before, k) - At(c.freed_idle, k) - At(c.taken, k) + At(c.granted, k);
    }
  }
  for (int k = 0; k < kResources; ++k) {
    At(plan_.shortfall, k) = At(plan_.wanted, k) - At(plan_.granted, k);
  }
  plan_.satisfied = plan_.shortfall == Resources{};
}

// Imposed slowdown: per job, the largest (SSGD) or mean (otherwise) fraction taken.
void Planner::AddImposedSlowdown() {
  std::vector<double> frac_max(s_.jobs.size() * kResources, 0), frac_sum(frac_max.size(), 0);
  std::vector<int> pod_count(s_.jobs.size(), 0);
  for (size_t i = 0; i < s_.pods.size(); ++i) {
    const Pod& p = s_.pods[i];
    if (p.job.empty()) continue;
    size_t j = job_index_.at(p.job);
    ++pod_count[j];
    for (int k = 0; k < kResources; ++k) {
      double f = static_cast<double>(At(plan_.pods[i].taken, k)) / static_cast<double>(At(p.allocation, k));
      frac_max[j * kResources + k] = std::max(frac_max[j * kResources + k], f);
      frac_sum[j * kResources + k] += f;
    }
  }
  for (size_t j = 0; j < s_.jobs.size(); ++j) {
    const Job& job = s_.jobs[j];
    for (int k = 0; k < kResources; ++k) {
      double f = job.synchronous ? frac_max[j * kResources + k]
                                 : frac_sum[j * kResources + k] / std::max(1, pod_count[j]);
      double sensitivity = k == 0 ? job.cpu_sensitivity : job.bandwidth_sensitivity;
      plan_.imposed_slowdown_seconds += r_.horizon_seconds * sensitivity * f;
    }
  }
}

void Planner::Decide() {
  if (!plan_.satisfied) {
    plan_.reason = "demand not met: short by " + std::to_string(plan_.shortfall.cpu_millicores) +
                   " millicores and " + std::to_string(plan_.shortfall.bandwidth_bps) + " bps";
  } else if (r_.sync_loss_seconds > plan_.imposed_slowdown_seconds) {
    plan_.switch_recommended = true;
    plan_.reason = "switch: staying synchronous loses " + Num(r_.sync_loss_seconds) +
                   " s, more than the " + Num(plan_.imposed_slowdown_seconds) + " s imposed on others";
  } else {
    plan_.reason = "stay: staying synchronous loses " + Num(r_.sync_loss_seconds) +
                   " s, not more than the " + Num(plan_.imposed_slowdown_seconds) +
                   " s imposed on others";
  }
}

}  // namespace

StatusOr<Plan> PlanReallocation(const ClusterState& s, const ReallocationRequest& r,
                                const PlannerOptions& o) {
  STAR_RETURN_IF_ERROR(Validate(o));
  STAR_RETURN_IF_ERROR(Validate(s, r));
  return Planner(s, r, o).Run();
}

Plan Undo(const Plan& plan, const std::string& drop_job) {
  Plan undo;
  for (const PodChange& c : plan.pods) {
    if (!drop_job.empty() && c.job == drop_job) continue;
    PodChange u = c;
    u.before = c.after;
    u.after = c.before;
    u.freed_idle = u.taken = u.granted = Resources{};
    undo.pods.push_back(std::move(u));
  }
  std::vector<std::string> names;
  for (const api::NodeAllocation& a : plan.allocations) names.push_back(a.name);
  undo.allocations = BuildAllocations(names, undo.pods);
  undo.satisfied = true;
  undo.reason = "undo: restores the allocations from before the plan";
  return undo;
}

Status CheckGuarantees(const ClusterState& s, const Plan& plan) {
  std::unordered_map<std::string, const PodChange*> changes;
  for (const PodChange& c : plan.pods) {
    if (!changes.emplace(c.uid, &c).second) {
      return Status::FailedPrecondition("pod " + c.uid + ": listed more than once");
    }
  }
  if (changes.size() != s.pods.size()) {
    return Status::FailedPrecondition("plan lists " + std::to_string(changes.size()) +
                                      " pods, the cluster has " + std::to_string(s.pods.size()));
  }
  std::unordered_map<std::string, Resources> used;
  for (const Pod& p : s.pods) {
    auto it = changes.find(p.uid);
    if (it == changes.end()) return Status::FailedPrecondition("pod " + p.uid + ": missing from the plan");
    const Resources& after = it->second->after;
    for (int k = 0; k < kResources; ++k) {
      if (At(after, k) < 0 || (p.guaranteed && At(after, k) < At(p.request, k))) {
        return Status::FailedPrecondition("pod " + p.uid + ": " + kResourceName[k] + " " +
                                          std::to_string(At(after, k)) + " below its request " +
                                          std::to_string(At(p.request, k)));
      }
    }
    used[p.node] = Sum(used[p.node], after);
  }
  for (const Node& n : s.nodes) {
    for (int k = 0; k < kResources; ++k) {
      if (At(used[n.name], k) > At(n.capacity, k)) {
        return Status::FailedPrecondition("node " + n.name + ": " + kResourceName[k] + " " +
                                          std::to_string(At(used[n.name], k)) + " over capacity " +
                                          std::to_string(At(n.capacity, k)));
      }
    }
  }
  return Status();
}

}  // namespace star::resources
