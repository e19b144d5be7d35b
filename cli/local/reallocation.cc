#include "local/reallocation.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "local/format.h"
#include "star/core/resources/planner.h"

namespace star::local {
namespace {

// Bandwidth is not planned here: a nominal link the pods split evenly.
constexpr int64_t kLink = 1'000'000'000;

// One slot as a node shared by worker `w` (the job) and its neighbor (another job): the
// worker holds 1/(n+1) of the slot, the neighbor the rest, guaranteed when it declared so.
resources::ClusterState SlotState(const ReallocationContext& ctx, int w,
                                  const ActiveInjection& a) {
  const int n = a.spec.neighbor_threads;
  resources::ClusterState cs;
  cs.nodes.push_back({"slot" + std::to_string(w), {ctx.worker_millicores, kLink}});
  resources::Job job;
  job.name = ctx.job;
  job.synchronous = true;
  job.iteration_seconds = 1;
  resources::Job other;
  other.name = "neighbor";
  other.synchronous = false;
  other.iteration_seconds = 1;
  cs.jobs = {job, other};
  resources::Pod worker;
  worker.name = "worker-" + std::to_string(w);
  worker.uid = "w";
  worker.node = cs.nodes[0].name;
  worker.job = job.name;
  worker.allocation.cpu_millicores = ctx.worker_millicores / (n + 1);
  worker.allocation.bandwidth_bps = kLink / 2;
  resources::Pod neighbor;
  neighbor.name = "neighbor";
  neighbor.uid = "n";
  neighbor.node = cs.nodes[0].name;
  neighbor.job = other.name;
  neighbor.allocation.cpu_millicores = ctx.worker_millicores - worker.allocation.cpu_millicores;
  neighbor.allocation.bandwidth_bps = kLink / 2;
  neighbor.guaranteed = a.spec.neighbor_guarantee_cpus > 0;
  neighbor.request.cpu_millicores = std::min<int64_t>(
      neighbor.allocation.cpu_millicores,
      static_cast<int64_t>(std::llround(a.spec.neighbor_guarantee_cpus * 1000)));
  cs.pods = {worker, neighbor};
  return cs;
}

// The neighbor's CPU share before any cap: the slot less the worker's 1/(n+1).
int64_t NeighborShare(const ReallocationContext& ctx, const ActiveInjection& a) {
  return ctx.worker_millicores - ctx.worker_millicores / (a.spec.neighbor_threads + 1);
}

// Plans and (when worth it) applies the reallocation for worker `w`'s neighbor `a`.
// Returns the neighbor's cap when it was written.
std::optional<int64_t> ReallocateOne(const ReallocationContext& ctx, int w, double slowdown,
                                     double t, const ActiveInjection& a) {
  const resources::ClusterState cs = SlotState(ctx, w, a);
  const resources::Pod& worker = cs.pods[0];
  const resources::Pod& neighbor = cs.pods[1];
  resources::ReallocationRequest req;
  req.job = ctx.job;
  req.demands = {{"w", {ctx.worker_millicores - worker.allocation.cpu_millicores, 0}}};
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
  const int64_t granted = plan->granted.cpu_millicores;
  if (granted <= 0 || req.sync_loss_seconds <= plan->imposed_slowdown_seconds) {
    ctx.event({t, "reallocate_skipped", w,
               "granted=" + std::to_string(granted) + "m sync_loss=" +
                   Fixed(req.sync_loss_seconds, 1) + "s imposed=" +
                   Fixed(plan->imposed_slowdown_seconds, 1) + "s"});
    return std::nullopt;
  }
  const int64_t neighbor_after = plan->pods[1].after.cpu_millicores;
  Sandbox& sb = *ctx.sandbox;
  Status s = sb.host().WriteCpu(sb.neighbor_cgroup(ctx.servers + w),
                                {QuotaUs(neighbor_after), kCfsPeriodUs,
                                 100 * a.spec.neighbor_threads});
  if (!s.ok()) {
    notice(s.message());
    return std::nullopt;
  }
  ctx.event({t, "reallocate", w,
             "neighbor cpu " + std::to_string(neighbor.allocation.cpu_millicores) + "m -> " +
                 std::to_string(neighbor_after) + "m (guarantee " +
                 std::to_string(neighbor.request.cpu_millicores) + "m), worker +" +
                 std::to_string(granted) + "m"});
  return neighbor_after;
}

// The compute need of `worker` in `needs`, if it is listed with one.
std::optional<op::ResourceNeed> ComputeNeedOf(const op::ResourceNeeds& needs, int worker) {
  for (const op::ResourceNeed& n : needs.workers) {
    if (n.worker == worker && n.cause == api::StragglerCause::kCompute) return n;
  }
  return std::nullopt;
}

}  // namespace

void Reallocator::Update(const op::ResourceNeeds& needs, double t,
                         const std::vector<ActiveInjection>& injections) {
  if (needs.revision == revision_) return;
  revision_ = needs.revision;
  for (size_t i = 0; i < injections.size(); ++i) {
    const ActiveInjection& a = injections[i];
    if (a.spec.kind != InjectionKind::kNeighbor || !a.applied) continue;
    if (a.lifted) {
      neighbors_.erase(i);  // lifting removed the cap
      continue;
    }
    UpdateOne(ComputeNeedOf(needs, a.spec.worker), t, a, neighbors_[i]);
  }
}

void Reallocator::UpdateOne(const std::optional<op::ResourceNeed>& need, double t,
                            const ActiveInjection& a, NeighborState& state) {
  if (need == state.decided) return;
  if (!need) {
    if (state.capped_millicores >= 0) Undo(t, a, state);
    if (state.capped_millicores < 0) state.decided.reset();
    return;
  }
  state.decided = need;
  if (std::optional<int64_t> cap = ReallocateOne(ctx_, need->worker, need->slowdown, t, a)) {
    state.capped_millicores = *cap;
  } else if (state.capped_millicores >= 0) {
    Undo(t, a, state);  // a new plan that does not cap: the old cap goes
  }
}

// Gives the neighbor its CPU back: uncapped, with the weight it was injected with.
void Reallocator::Undo(double t, const ActiveInjection& a, NeighborState& state) {
  const int w = a.spec.worker;
  Sandbox& sb = *ctx_.sandbox;
  Status s = sb.host().WriteCpu(sb.neighbor_cgroup(ctx_.servers + w),
                                {-1, kCfsPeriodUs, 100 * a.spec.neighbor_threads});
  if (!s.ok()) {
    if (ctx_.notice) {
      ctx_.notice("undoing the reallocation for worker " + std::to_string(w) + ": " +
                  s.message());
    }
    return;
  }
  ctx_.event({t, "reallocate_undone", w,
              "neighbor cpu " + std::to_string(state.capped_millicores) + "m -> " +
                  std::to_string(NeighborShare(ctx_, a)) + "m"});
  state.capped_millicores = -1;
}

}  // namespace star::local
