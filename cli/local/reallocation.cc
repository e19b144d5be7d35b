#include "local/reallocation.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "local/format.h"
#include "star/core/resources/planner.h"

namespace star::local {
namespace {

// A neighbor's slot has no link of its own to plan: a nominal one the pods split evenly.
constexpr int64_t kLink = 1'000'000'000;

bool Bandwidth(const ActiveInjection& a) { return a.spec.kind == InjectionKind::kBwNeighbor; }

// What the neighbor holds before any cap: for a neighbor the slot's CPU less the worker's
// 1/(n+1) (millicores); for a bwneighbor its rate on the uplink (bits per second).
int64_t NeighborShare(const ReallocationContext& ctx, const ActiveInjection& a) {
  if (Bandwidth(a)) return a.spec.bwneighbor_bps;
  return ctx.worker_millicores - ctx.worker_millicores / (a.spec.neighbor_threads + 1);
}

// One slot as a node shared by worker `w` (the job) and its neighbor (another job): a
// neighbor holds the slot's CPU but the worker's 1/(n+1) and half of a nominal link; a
// bwneighbor its rate of the uplink and half of the CPU (which is not planned for it).
resources::ClusterState SlotState(const ReallocationContext& ctx, int w,
                                  const ActiveInjection& a) {
  const bool bw = Bandwidth(a);
  const int64_t link = bw ? a.spec.link_bps : kLink;
  resources::ClusterState cs;
  cs.nodes.push_back({"slot" + std::to_string(w), {ctx.worker_millicores, link}});
  resources::Job job{.name = ctx.job, .synchronous = true, .iteration_seconds = 1};
  resources::Job other{.name = "neighbor", .synchronous = false, .iteration_seconds = 1};
  cs.jobs = {job, other};
  const int64_t neighbor_cpu = bw ? ctx.worker_millicores / 2 : NeighborShare(ctx, a);
  const int64_t neighbor_bw = bw ? NeighborShare(ctx, a) : link / 2;
  resources::Pod worker;
  worker.name = "worker-" + std::to_string(w);
  worker.uid = "w";
  worker.node = cs.nodes[0].name;
  worker.job = job.name;
  worker.allocation = {ctx.worker_millicores - neighbor_cpu, link - neighbor_bw};
  resources::Pod neighbor;
  neighbor.name = "neighbor";
  neighbor.uid = "n";
  neighbor.node = cs.nodes[0].name;
  neighbor.job = other.name;
  neighbor.allocation = {neighbor_cpu, neighbor_bw};
  if (bw) {
    neighbor.request.bandwidth_bps = a.spec.bwneighbor_guarantee_bps;
  } else {
    neighbor.request.cpu_millicores = std::min<int64_t>(
        neighbor_cpu, static_cast<int64_t>(std::llround(a.spec.neighbor_guarantee_cpus * 1000)));
  }
  neighbor.guaranteed = neighbor.request.cpu_millicores > 0 || neighbor.request.bandwidth_bps > 0;
  cs.pods = {worker, neighbor};
  return cs;
}

std::string Amount(const ActiveInjection& a, int64_t v) {
  return Bandwidth(a) ? std::to_string(v / 1000) + "kbit" : std::to_string(v) + "m";
}

// Caps worker `w`'s neighbor at `cap`: its cgroup's CPU, or its class on the uplink.
Status Cap(const ReallocationContext& ctx, int w, const ActiveInjection& a, int64_t cap) {
  Sandbox& sb = *ctx.sandbox;
  if (Bandwidth(a)) {
    return sb.SetUplinkShare(ctx.servers + w, BwNeighborShare(sb, ctx.peer_slot, a.spec, cap));
  }
  const int64_t quota = cap < 0 ? -1 : QuotaUs(cap);
  return sb.host().WriteCpu(sb.neighbor_cgroup(ctx.servers + w),
                            {quota, kCfsPeriodUs, 100 * a.spec.neighbor_threads});
}

// Plans and (when worth it) applies the reallocation for worker `w`'s neighbor `a`.
// Returns the neighbor's cap when it was written.
std::optional<int64_t> ReallocateOne(const ReallocationContext& ctx, int w, double slowdown,
                                     double t, const ActiveInjection& a) {
  const resources::ClusterState cs = SlotState(ctx, w, a);
  const resources::Pod& neighbor = cs.pods[1];
  resources::ReallocationRequest req;
  req.job = ctx.job;
  req.demands = {{"w", Bandwidth(a) ? resources::Resources{0, neighbor.allocation.bandwidth_bps}
                                    : resources::Resources{neighbor.allocation.cpu_millicores, 0}}};
  req.horizon_seconds = 60;
  // Every worker of the job waits on the straggler: worker-seconds lost.
  req.sync_loss_seconds =
      ctx.workers * req.horizon_seconds * std::max(0.0, 1.0 - 1.0 / std::max(slowdown, 1.0));
  auto plan = resources::PlanReallocation(cs, req, resources::PlannerOptions{});
  auto notice = [&](const std::string& s) {
    if (ctx.notice) ctx.notice("reallocation for worker " + std::to_string(w) + ": " + s);
  };
  if (!plan.ok()) {
    notice(plan.status().message());
    return std::nullopt;
  }
  const int64_t granted = Bandwidth(a) ? plan->granted.bandwidth_bps : plan->granted.cpu_millicores;
  if (granted <= 0 || req.sync_loss_seconds <= plan->imposed_slowdown_seconds) {
    ctx.event({t, "reallocate_skipped", w,
               "granted=" + Amount(a, granted) + " sync_loss=" + Fixed(req.sync_loss_seconds, 1) +
                   "s imposed=" + Fixed(plan->imposed_slowdown_seconds, 1) + "s"});
    return std::nullopt;
  }
  const int64_t after = Bandwidth(a) ? plan->pods[1].after.bandwidth_bps
                                     : plan->pods[1].after.cpu_millicores;
  if (Status s = Cap(ctx, w, a, after); !s.ok()) {
    notice(s.message());
    return std::nullopt;
  }
  const int64_t before = NeighborShare(ctx, a);
  const int64_t guarantee = Bandwidth(a) ? neighbor.request.bandwidth_bps : neighbor.request.cpu_millicores;
  ctx.event({t, "reallocate", w,
             std::string(Bandwidth(a) ? "neighbor bandwidth " : "neighbor cpu ") +
                 Amount(a, before) + " -> " + Amount(a, after) + " (guarantee " +
                 Amount(a, guarantee) + "), worker +" + Amount(a, granted)});
  return after;
}

// The need of `worker` in `needs` that its neighbor can meet: compute for a neighbor,
// communication for a bwneighbor.
std::optional<op::ResourceNeed> NeedOf(const op::ResourceNeeds& needs, const ActiveInjection& a) {
  const api::StragglerCause cause =
      Bandwidth(a) ? api::StragglerCause::kCommunication : api::StragglerCause::kCompute;
  for (const op::ResourceNeed& n : needs.workers) {
    if (n.worker == a.spec.worker && n.cause == cause) return n;
  }
  return std::nullopt;
}

}  // namespace

std::vector<int> Reallocator::Update(const op::ResourceNeeds& needs, double t,
                                     const std::vector<ActiveInjection>& injections) {
  if (needs.revision == revision_) return {};
  revision_ = needs.revision;
  std::set<int> met;
  for (size_t i = 0; i < injections.size(); ++i) {
    const ActiveInjection& a = injections[i];
    const bool gives = a.spec.kind == InjectionKind::kNeighbor || Bandwidth(a);
    if (!gives || !a.applied) continue;
    if (a.lifted) {
      neighbors_.erase(i);  // lifting removed the cap
      continue;
    }
    const std::optional<op::ResourceNeed> need = NeedOf(needs, a);
    UpdateOne(need, t, a, neighbors_[i]);
    if (need && neighbors_[i].capped >= 0) met.insert(need->worker);
  }
  std::vector<int> unmet;
  for (const op::ResourceNeed& n : needs.workers) {
    if (!met.count(n.worker)) unmet.push_back(n.worker);
  }
  return unmet;
}

void Reallocator::UpdateOne(const std::optional<op::ResourceNeed>& need, double t,
                            const ActiveInjection& a, NeighborState& state) {
  if (need == state.decided) return;
  if (!need) {
    if (state.capped >= 0) Undo(t, a, state);
    if (state.capped < 0) state.decided.reset();
    return;
  }
  state.decided = need;
  if (std::optional<int64_t> cap = ReallocateOne(ctx_, need->worker, need->slowdown, t, a)) {
    state.capped = *cap;
  } else if (state.capped >= 0) {
    Undo(t, a, state);  // a new plan that does not cap: the old cap goes
  }
}

// Gives the neighbor back what it held when injected: its uncapped weighted CPU share,
// or its rate on the uplink.
void Reallocator::Undo(double t, const ActiveInjection& a, NeighborState& state) {
  const int w = a.spec.worker;
  if (Status s = Cap(ctx_, w, a, Bandwidth(a) ? NeighborShare(ctx_, a) : -1); !s.ok()) {
    if (ctx_.notice) {
      ctx_.notice("undoing the reallocation for worker " + std::to_string(w) + ": " +
                  s.message());
    }
    return;
  }
  ctx_.event({t, "reallocate_undone", w,
              std::string(Bandwidth(a) ? "neighbor bandwidth " : "neighbor cpu ") +
                  Amount(a, state.capped) + " -> " + Amount(a, NeighborShare(ctx_, a))});
  state.capped = -1;
}

}  // namespace star::local
