// The control loop's batch step: per-worker batches from linear fits of their compute.
#include <algorithm>
#include <set>

#include "loop/drift.h"
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

// Batch adaptation evens out one barrier that every worker meets. Under a setting where
// workers drift apart (groups, fixed_k with k < n, ASGD) there is none: a slow worker
// alone in its group would only get a smaller batch and make noisier updates as often
// as the others (the testbed's static straggler: 243 iterations to the target against
// 193 with the same groups at equal batches), so batches go back to equal there.
std::vector<int64_t> JobControlLoop::PlanWorkerBatches(const std::vector<int64_t>& current,
                                                       const SyncSetting& sync) const {
  const int64_t global = spec_.training.global_batch_size;
  if (!adapt_batches_ || Drifts(sync.mode, sync.k, sync.groups.size(), n_)) {
    return batch::EqualBatches(global, n_);
  }
  batch::PlanInput in;
  in.global_batch = global;
  in.min_batch = spec_.mitigation.batch_adaptation.min_local_batch;
  for (int w = 0; w < n_; ++w) in.workers.push_back(FitWorker(w));
  StatusOr<batch::BatchPlan> plan = batch::PlanBatches(in);
  if (!plan.ok()) return current;
  const double old_span = Makespan(in.workers, current);
  if (plan.value().makespan_seconds < old_span * (1 - options_.min_batch_gain)) {
    return plan.value().batches;
  }
  return current;
}

}  // namespace star::op
