// The control loop's mode choice: which synchronisation (mode, k, groups) the job runs.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "star/core/select/clustering.h"
#include "star/core/select/cost_model.h"
#include "star/operator/control_loop.h"
#include "loop/times.h"

namespace star::op {
namespace {

// Workers fastest first (ties by rank), as fixed_k's single group.
std::vector<std::vector<int>> SpeedOrder(const std::vector<double>& times) {
  std::vector<int> order(times.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return times[static_cast<size_t>(a)] < times[static_cast<size_t>(b)];
  });
  return {order};
}

// SSGD's estimate: Select's among its candidates (Select always has one), else (a
// learned selection holds only its choice) SSGD's cost model on the same input.
double SsgdCost(const select::Selection& sel, const select::SelectionInput& in) {
  for (const auto& c : sel.candidates) {
    if (c.mode == api::SyncMode::kSsgd) return c.estimated_seconds_per_progress;
  }
  return select::SsgdSecondsPerProgress(in.iteration_seconds, in.batch_per_worker, in.noise_scale);
}

}  // namespace

double JobControlLoop::NoiseScale() const {
  return noise_.NoiseScale().value_or(options_.default_noise_scale);
}

double JobControlLoop::BatchPerWorker() const {
  return static_cast<double>(spec_.training.global_batch_size) / static_cast<double>(n_);
}

JobControlLoop::SyncSetting JobControlLoop::ChooseSync(const std::vector<double>& times, double t) {
  const bool measured = AllMeasured(times);
  switch (spec_.synchronization.policy) {
    case api::SyncPolicy::kSsgd:
      return {api::SyncMode::kSsgd, n_, {}};
    case api::SyncPolicy::kAsgd:
      return {api::SyncMode::kAsgd, 1, {}};
    case api::SyncPolicy::kFixedK: {
      if (!measured) break;
      const std::vector<double> ring = RingSeconds(times);
      const int k = std::max(select::StarKStar(ring, BatchPerWorker(), NoiseScale()),
                             options_.select.min_k);
      return {api::SyncMode::kFixedK, std::clamp(k, 1, n_), SpeedOrder(ring)};
    }
    case api::SyncPolicy::kGroups:
      if (!measured) break;
      return {api::SyncMode::kGroups, n_,
              select::ClusterByTime(times, options_.select.group_threshold_seconds,
                                    options_.select.group_threshold_relative)};
    case api::SyncPolicy::kAuto:
      if (!measured) break;
      return ChooseAutoSync(times, t).value_or(in_force_.sync);
  }
  return in_force_.sync;
}

bool JobControlLoop::AmpInPlay() const {
  const std::vector<bool> amp_now = amp_.States(n_);
  return std::find(amp_now.begin(), amp_now.end(), true) != amp_now.end() ||
         (last_amp_change_round_ >= 0 &&
          rounds_ - last_amp_change_round_ < spec_.mitigation.detection.window);
}

std::optional<JobControlLoop::SyncSetting> JobControlLoop::ChooseAutoSync(
    const std::vector<double>& times, double t) {
  const SyncSetting ssgd{api::SyncMode::kSsgd, n_, {}};
  const bool flagged = !ModeStragglers().empty();
  if (!flagged && (!detector_.Stragglers().empty() || AmpInPlay())) {
    // Every straggler is AMP's to fix for now, or AMP runs somewhere (its workers'
    // times are not what they will be without it): stay synchronous meanwhile.
    return ssgd;
  }
  if (in_force_.sync.mode != api::SyncMode::kSsgd && last_mode_round_ >= 0 &&
      rounds_ - last_mode_round_ < options_.mode_dwell_rounds) {
    return std::nullopt;  // recently switched: let it settle
  }
  select::SelectionInput in{spec_.architecture, BatchPerWorker(), NoiseScale(), times};
  StatusOr<select::Selection> sel = adapt_batches_ ? SelectWithPlannedBatches(in, t) : SelectMode(in, t);
  if (!sel.ok()) return std::nullopt;  // keep the mode in force
  if (!WorthLeaving(sel.value())) return std::nullopt;
  if (!flagged && in_force_.sync.mode == api::SyncMode::kSsgd &&
      sel.value().mode != api::SyncMode::kSsgd) {
    // Nobody the detector flags (or AMP is handling them): leave SSGD only for a clear
    // gain (noise must not switch modes; with half of the workers slow the detector's
    // typical worker is slow too, so it flags nobody) between workers really slower
    // than others. Out of SSGD, Select decides alone: flags on uneven workers come and
    // go, and going back to SSGD between them costs two switches.
    // Nor before the detector has judged every worker: a worker slow from its first
    // reports is flagged (static) once its window is full, and batch adaptation may
    // then be the better fix.
    if (!EveryWorkerJudged()) return ssgd;
    // Nor while a slow link names a worker the detector has not flagged: its own time
    // jumped when the link was named, and the detector (then reallocation) judges it
    // first. Out of the ring its link would not be measured again.
    if (!links_.Named().empty()) return ssgd;
    const auto [tmin, tmax] = std::minmax_element(times.begin(), times.end());
    if (*tmax < options_.auto_min_spread * *tmin) return ssgd;
    if (!(sel.value().estimated_seconds_per_progress <
          (1 - options_.auto_switch_margin) * SsgdCost(sel.value(), in))) {
      return ssgd;
    }
  }
  return FromSelection(sel.value(), times);
}

bool JobControlLoop::EveryWorkerJudged() const {
  for (int i = 0; i < n_; ++i) {
    if (!detector_.View(i).ready) return false;
  }
  return true;
}

bool JobControlLoop::WorthLeaving(const select::Selection& sel) const {
  const api::SyncMode now = in_force_.sync.mode;
  if (now == api::SyncMode::kSsgd || sel.mode == api::SyncMode::kSsgd || sel.mode == now) return true;
  for (const auto& c : sel.candidates) {
    if (c.mode == now) {
      return sel.estimated_seconds_per_progress <
             (1 - options_.mode_switch_margin) * c.estimated_seconds_per_progress;
    }
  }
  return true;  // no estimate of the mode in force (a learned selection): its choice
}

bool UsesLearnedSelector(const api::TrainingJobSpec& spec) {
  return spec.synchronization.selector == api::ModeSelector::kMl &&
         spec.synchronization.policy == api::SyncPolicy::kAuto;
}

StatusOr<select::Selection> JobControlLoop::SelectMode(const select::SelectionInput& in, double t) {
  if (UsesLearnedSelector(spec_) && learned_.selector != nullptr) {
    StatusOr<select::Selection> learned = select::SelectLearned(
        *learned_.selector, in, select::SelectorContext{CommunicationShare()}, options_.select);
    if (learned.ok()) return learned;
    RecordSelectorFallback(t, "model failed: " + learned.status().message());
  }
  return select::Select(in, options_.select);
}

StatusOr<select::Selection> JobControlLoop::SelectWithPlannedBatches(
    const select::SelectionInput& in, double t) {
  // Batch adaptation evens out a barrier of all workers (ssgd, fixed_k, asgd: Barriers)
  // but plans each group apart: the one-barrier modes are judged at the times their
  // planned batches give, groups at the measured ones (its groups are even inside).
  select::SelectionInput planned = in;
  planned.iteration_seconds = BalancedTimes(in.iteration_seconds);
  StatusOr<select::Selection> one = SelectMode(planned, t);
  StatusOr<select::Selection> apart = select::Select(in, options_.select);
  if (!one.ok() || !apart.ok()) return one;
  select::Selection out = std::move(one).value();
  for (const select::Candidate& c : apart.value().candidates) {
    if (c.mode != api::SyncMode::kGroups) continue;
    std::erase_if(out.candidates, [](const select::Candidate& o) { return o.mode == api::SyncMode::kGroups; });
    out.candidates.push_back(c);
    if (c.groups.size() > 1 && c.estimated_seconds_per_progress < out.estimated_seconds_per_progress) {
      out.mode = c.mode;
      out.k = c.k;
      out.groups = c.groups;
      out.estimated_seconds_per_progress = c.estimated_seconds_per_progress;
    }
  }
  return out;
}

void JobControlLoop::RecordSelectorFallback(double t, std::string reason) {
  if (selector_fallback_recorded_) return;
  selector_fallback_recorded_ = true;
  timeline_.push_back(MakeSelectorFallbackEvent(t, std::move(reason)));
}

double JobControlLoop::CommunicationShare() const {
  double sum = 0;
  int counted = 0;
  for (const WorkerData& wd : workers_) {
    double compute = 0, total = 0;
    for (size_t i = 0; i < wd.iteration_seconds.size(); ++i) {
      compute += wd.batch_compute[i].second;
      total += wd.iteration_seconds[i];
    }
    if (!(total > 0)) continue;
    sum += (total - compute) / total;
    ++counted;
  }
  return counted ? std::clamp(sum / counted, 0.0, 1.0) : 0.0;
}

JobControlLoop::SyncSetting JobControlLoop::FromSelection(const select::Selection& sel,
                                                         const std::vector<double>& times) const {
  SyncSetting s{sel.mode, std::clamp(sel.k, 1, n_), {}};
  if (s.mode == api::SyncMode::kFixedK) {
    s.groups = SpeedOrder(RingSeconds(times));
  } else if (s.mode == api::SyncMode::kGroups) {
    s.groups = sel.groups;
  }
  return s;
}

JobControlLoop::SyncSetting JobControlLoop::KeepRing(SyncSetting next) const {
  // fixed_k: a new speed order among equally placed workers (noise) is no change as
  // long as the ring (the first k) keeps the same members.
  const SyncSetting& now = in_force_.sync;
  if (next.mode != api::SyncMode::kFixedK || now.mode != next.mode || next.k != now.k ||
      now.groups.size() != 1 || next.groups.size() != 1) {
    return next;
  }
  std::vector<int> a(next.groups[0].begin(), next.groups[0].begin() + next.k);
  std::vector<int> b(now.groups[0].begin(), now.groups[0].begin() + next.k);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a == b) next.groups = now.groups;
  return next;
}

}  // namespace star::op
