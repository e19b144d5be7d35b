// The control loop's decision: gating, then mode, AMP and batches, then the Decision
// issued to the workers and the timeline of what changed.
#include <algorithm>
#include <cmath>
#include <limits>

#include "loop/times.h"
#include "star/operator/control_loop.h"

namespace star::op {

void JobControlLoop::Decide(double t) {
  if (!PreviousDecisionApplied()) {
    redecide_ = true;
    return;
  }
  redecide_ = false;
  if (api::IsPipeline(spec_.parallelism)) return DecidePipeline(t);
  const std::vector<double> times = MedianIterationSeconds();
  Setting next;
  next.sync = KeepRing(ChooseSync(times, t));
  next.amp = amp_.States(n_);
  next.batches = PlanWorkerBatches(in_force_.batches, next.sync);
  next.warmup = in_force_.warmup;
  if (next == in_force_ || DriftWaitTooLong(next, times)) return;
  const bool switches = next.sync != in_force_.sync;
  if (switches) last_mode_round_ = rounds_;
  std::optional<api::Decision> d = Issue(next, times);
  if (!d) return;  // never hand out an invalid decision
  RecordChanges(t, next);
  in_force_ = std::move(next);
  decision_ = std::move(d);
  decision_switches_ = switches;
}

bool JobControlLoop::PreviousDecisionApplied() const {
  // A switch is replaced only after every worker has passed its iteration: a worker
  // that never saw it (it reports the newest only) would otherwise skip a switch the
  // others make. A decision of batches or AMP only is no switch (api::
  // SameSynchronization): a worker that misses it runs its old batch until the next
  // decision, which names every worker's batch and applies after it (Issue).
  return !decision_ || !decision_switches_ || MinIteration() >= decision_->apply_at_iteration;
}

namespace {

// Whether workers' iteration counts drift apart under a mode: not in SSGD, nor in
// fixed_k waiting for every worker (k = n) or in one group of all: those keep every
// worker in step as SSGD does.
bool Drifts(api::SyncMode mode, int k, size_t groups, int n) {
  if (mode == api::SyncMode::kFixedK) return k < n;
  if (mode == api::SyncMode::kGroups) return groups > 1;
  return mode != api::SyncMode::kSsgd;
}

}  // namespace

int64_t JobControlLoop::ApplyAtIteration(const std::vector<double>& times) const {
  // The margin is in the slowest worker's iterations: in fixed_k, groups and asgd the
  // fastest workers run ahead by the speed ratio, and the slowest must still report
  // (and learn the decision) before the fastest reach it. In a mode that keeps every
  // worker in step (ssgd, one group of all, fixed_k waiting for all) none runs ahead.
  double ratio = 1;
  const SyncSetting& now = in_force_.sync;
  if (AllMeasured(times) && Drifts(now.mode, now.k, now.groups.size(), n_)) {
    const auto [tmin, tmax] = std::minmax_element(times.begin(), times.end());
    ratio = std::clamp(*tmax / *tmin, 1.0, 50.0);
  }
  // A worker whose data loader draws ahead needs the decision before it draws the batch
  // of the apply iteration.
  int lookahead = 0;
  for (const WorkerData& wd : workers_) lookahead = std::max(lookahead, wd.lookahead);
  return SaturatingAdd(SaturatingAdd(std::max<int64_t>(max_iteration_, 0), lookahead),
                       SaturatingCeil(static_cast<double>(options_.apply_margin_iterations) * ratio));
}

bool JobControlLoop::DriftWaitTooLong(const Setting& next, const std::vector<double>& times) const {
  const SyncSetting& now = in_force_.sync;
  if (next.sync == now || !Drifts(now.mode, now.k, now.groups.size(), n_) ||
      !Drifts(next.sync.mode, next.sync.k, next.sync.groups.size(), n_) || !AllMeasured(times)) {
    return false;
  }
  const int64_t at = ApplyAtIteration(times);
  std::vector<double> arrive(static_cast<size_t>(n_));
  for (size_t i = 0; i < arrive.size(); ++i) {
    const WorkerData& wd = workers_[i];
    arrive[i] = static_cast<double>(at - std::max<int64_t>(wd.last_iteration, 0)) * times[i];
  }
  const double last = *std::max_element(arrive.begin(), arrive.end());
  return last - FirstToWait(arrive) > options_.max_drift_wait_seconds;
}

double JobControlLoop::FirstToWait(const std::vector<double>& arrive) const {
  const SyncSetting& now = in_force_.sync;
  if (spec_.architecture != api::Architecture::kAllReduce || now.mode != api::SyncMode::kFixedK ||
      now.groups.size() != 1 || now.groups[0].size() != arrive.size()) {
    return *std::min_element(arrive.begin(), arrive.end());
  }
  // fixed_k over all-reduce: the ring carries the job's updates and moves at its slowest
  // member's pace (with parameter servers there is no ring: every worker runs its own).
  // Children ahead of it idle at the apply iteration while it keeps training, at the cost
  // of their gradients only, and with a straggler in the ring they run further ahead at
  // every iteration (holding would keep the straggler's pace to the end); the wait that
  // costs the job is the ring's, for children behind it.
  double ring = 0;
  for (int i = 0; i < now.k; ++i) {
    ring = std::max(ring, arrive[static_cast<size_t>(now.groups[0][static_cast<size_t>(i)])]);
  }
  return ring;
}

std::optional<api::Decision> JobControlLoop::Issue(const Setting& next,
                                                   const std::vector<double>& times) const {
  api::Decision d;
  d.epoch = SaturatingAdd(std::max(decision_ ? decision_->epoch : 0, epoch_base_), 1);
  d.apply_at_iteration = ApplyAtIteration(times);
  if (decision_ && MinIteration() < decision_->apply_at_iteration) {
    // The previous decision (batches or AMP only) is not behind every worker yet: this
    // one applies after it, so no worker takes the two up in the wrong order.
    d.apply_at_iteration = std::max(d.apply_at_iteration, SaturatingAdd(decision_->apply_at_iteration, 1));
  }
  // Past kMaxIteration no worker could take it up.
  if (d.apply_at_iteration > kMaxIteration || d.epoch == std::numeric_limits<int64_t>::max()) return std::nullopt;
  d.mode = next.sync.mode;
  d.k = next.sync.k;
  d.groups = next.sync.groups;
  for (int i = 0; i < n_; ++i) {
    d.workers.push_back({i, static_cast<bool>(next.amp[static_cast<size_t>(i)]),
                         next.batches[static_cast<size_t>(i)]});
  }
  d.warmup = next.warmup;
  d.predicted_iteration_seconds = next.warmup.empty() ? 0 : predicted_iteration_seconds_;
  d.slow_link = next.warmup.empty() ? -1 : slow_link_;
  if (!api::Validate(d).ok()) return std::nullopt;
  return d;
}

void JobControlLoop::RecordChanges(double t, const Setting& next) {
  if (next.sync != in_force_.sync) {
    timeline_.push_back(MakeModeEvent(t, {next.sync.mode, next.sync.k, next.sync.groups}));
  }
  for (int i = 0; i < n_; ++i) {
    const size_t s = static_cast<size_t>(i);
    if (next.amp[s] != in_force_.amp[s]) timeline_.push_back(MakeAmpEvent(t, i, next.amp[s]));
  }
  if (next.batches != in_force_.batches) timeline_.push_back(MakeBatchesEvent(t, next.batches));
}

}  // namespace star::op
