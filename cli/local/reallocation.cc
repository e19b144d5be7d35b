#include "local/reallocation.h"

#include <algorithm>
#include <cmath>

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

// Plans and (when worth it) applies the reallocation for worker `w`'s neighbor `a`.
void ReallocateOne(const ReallocationContext& ctx, int w, double slowdown, double t,
                   const ActiveInjection& a) {
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
  if (!plan.ok()) return notice(plan.status().message());
  const int64_t granted = plan->granted.cpu_millicores;
  if (granted <= 0 || req.sync_loss_seconds <= plan->imposed_slowdown_seconds) {
    ctx.event({t, "reallocate_skipped", w,
               "granted=" + std::to_string(granted) + "m sync_loss=" +
                   Fixed(req.sync_loss_seconds, 1) + "s imposed=" +
                   Fixed(plan->imposed_slowdown_seconds, 1) + "s"});
    return;
  }
  const int64_t neighbor_after = plan->pods[1].after.cpu_millicores;
  Sandbox& sb = *ctx.sandbox;
  Status s = sb.host().WriteCpu(sb.neighbor_cgroup(ctx.servers + w),
                                {QuotaUs(neighbor_after), kCfsPeriodUs,
                                 100 * a.spec.neighbor_threads});
  if (!s.ok()) return notice(s.message());
  ctx.event({t, "reallocate", w,
             "neighbor cpu " + std::to_string(neighbor.allocation.cpu_millicores) + "m -> " +
                 std::to_string(neighbor_after) + "m (guarantee " +
                 std::to_string(neighbor.request.cpu_millicores) + "m), worker +" +
                 std::to_string(granted) + "m"});
}

}  // namespace

void Reallocate(const ReallocationContext& ctx,
                const std::vector<std::pair<int, double>>& compute_stragglers, double t,
                std::vector<ActiveInjection>& injections) {
  for (auto [w, slowdown] : compute_stragglers) {
    for (ActiveInjection& a : injections) {
      if (a.spec.kind != InjectionKind::kNeighbor || a.spec.worker != w || !a.applied ||
          a.lifted || a.reallocated) {
        continue;
      }
      a.reallocated = true;  // decided once per injection, applied or not
      ReallocateOne(ctx, w, slowdown, t, a);
    }
  }
}

}  // namespace star::local
