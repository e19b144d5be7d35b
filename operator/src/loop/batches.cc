// The control loop's batch step: per-worker batches from linear fits of their compute.
#include <algorithm>
#include <cstddef>
#include <set>
#include <vector>

#include "star/core/batch/baseline.h"
#include "star/core/batch/planner.h"
#include "star/operator/control_loop.h"

namespace star::op {
namespace {

double Makespan(const std::vector<batch::WorkerModel>& m, const std::vector<int64_t>& b) {
  double worst = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    worst = std::max(worst, m[i].alpha * static_cast<double>(b[i]) + m[i].beta);
  }
  return worst;
}

}  // namespace

batch::WorkerModel JobControlLoop::FitWorker(int worker) const {
  const WorkerData& wd = workers_[static_cast<size_t>(worker)];
  // Only samples taken in the worker's current AMP state describe its speed now.
  const bool amp_now = amp_.Enabled(worker);
  std::vector<std::pair<double, double>> samples;
  for (size_t j = 0; j < wd.batch_compute.size(); ++j) {
    if (wd.batch_amp[j] == amp_now) samples.push_back(wd.batch_compute[j]);
  }
  if (samples.empty()) samples = wd.batch_compute;
  batch::WorkerModel m;
  std::set<double> sizes;
  for (const auto& [b, t] : samples) sizes.insert(b);
  // A line through batch sizes close together (32 and 33 after a small rebalance) is
  // mostly the times' noise: its slope can come out near zero (clamped at 0 by
  // FitLinear), and a worker with no cost per sample would be handed most of the global
  // batch. Fit only over sizes at least a factor kFitSpread apart, and only keep a
  // positive slope; otherwise all of the time is per sample.
  constexpr double kFitSpread = 2;
  if (sizes.size() >= 2 && *sizes.rbegin() >= kFitSpread * *sizes.begin()) {
    StatusOr<batch::WorkerModel> fit = batch::FitLinear(samples);
    if (fit.ok() && fit.value().alpha > 0) return fit.value();
  }
  if (!samples.empty()) {
    double per_sample = 0;
    for (const auto& [b, t] : samples) per_sample += t / b;
    m.alpha = per_sample / static_cast<double>(samples.size());
  }
  return m;
}

// The sets of workers whose batches are planned together under `sync`: each group in
// groups mode (a group is synchronous inside, and groups never wait for each other);
// otherwise all workers as one (SSGD's barrier; in fixed_k and ASGD a slow worker given
// a smaller batch keeps up with the others, so its gradients arrive fresh).
std::vector<std::vector<int>> JobControlLoop::Barriers(const SyncSetting& sync) const {
  if (sync.mode == api::SyncMode::kGroups && sync.groups.size() > 1) return sync.groups;
  std::vector<std::vector<int>> all(1);
  for (int w = 0; w < n_; ++w) all[0].push_back(w);
  return all;
}

// Batch adaptation evens out a barrier: each set of workers planned together (Barriers)
// shares its members' equal shares of the global batch by their fitted speeds, and a
// worker alone in its group keeps its equal share. Planned across groups, the testbed's
// static straggler, alone in its group with a batch of 33, made noisier updates as often
// as the others (243 iterations to the target against 193 for groups at equal batches).
std::vector<int64_t> JobControlLoop::PlanWorkerBatches(const std::vector<int64_t>& current,
                                                       const SyncSetting& sync) const {
  const std::vector<int64_t> equal = batch::EqualBatches(spec_.training.global_batch_size, n_);
  if (!adapt_batches_) return equal;
  std::vector<int64_t> out = equal;
  for (const std::vector<int>& unit : Barriers(sync)) {
    if (unit.size() < 2) continue;
    batch::PlanInput in;
    in.min_batch = spec_.mitigation.batch_adaptation.min_local_batch;
    std::vector<int64_t> now;
    int64_t now_sum = 0;
    for (int w : unit) {
      in.global_batch += equal[static_cast<size_t>(w)];
      in.workers.push_back(FitWorker(w));
      now.push_back(current[static_cast<size_t>(w)]);
      now_sum += now.back();
    }
    StatusOr<batch::BatchPlan> plan = batch::PlanBatches(in);
    // The unit's batches now, when they still sum to its share and the plan is not
    // clearly faster; else the plan (or equal shares without one).
    std::vector<int64_t> chosen = now;
    if (now_sum != in.global_batch || (plan.ok() && plan.value().makespan_seconds <
                                                        Makespan(in.workers, now) * (1 - options_.min_batch_gain))) {
      chosen = plan.ok() ? plan.value().batches : std::vector<int64_t>();
    }
    for (size_t i = 0; i < unit.size() && i < chosen.size(); ++i) out[static_cast<size_t>(unit[i])] = chosen[i];
  }
  return out;
}

std::vector<double> JobControlLoop::BalancedTimes(const std::vector<double>& times) const {
  const std::vector<int64_t> equal = batch::EqualBatches(spec_.training.global_batch_size, n_);
  batch::PlanInput in;
  in.min_batch = spec_.mitigation.batch_adaptation.min_local_batch;
  for (int w = 0; w < n_; ++w) {
    in.global_batch += equal[static_cast<size_t>(w)];
    in.workers.push_back(FitWorker(w));
  }
  StatusOr<batch::BatchPlan> plan = batch::PlanBatches(in);
  if (!plan.ok()) return times;
  std::vector<double> out(times.size());
  for (size_t i = 0; i < times.size() && i < in.workers.size(); ++i) {
    const batch::WorkerModel& m = in.workers[i];
    const double compute = m.alpha * static_cast<double>(equal[i]) + m.beta;
    out[i] = std::max(times[i] - compute, 0.0) + plan.value().makespan_seconds;
  }
  return out;
}

}  // namespace star::op
