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

// Select's estimate for SSGD among its candidates (0 when it has none).
double SsgdCost(const select::Selection& sel) {
  double cost = 0;
  for (const auto& c : sel.candidates) {
    if (c.mode == api::SyncMode::kSsgd) cost = c.estimated_seconds_per_progress;
  }
  return cost;
}

}  // namespace

double JobControlLoop::NoiseScale() const {
  return noise_.NoiseScale().value_or(options_.default_noise_scale);
}

double JobControlLoop::BatchPerWorker() const {
  return static_cast<double>(spec_.training.global_batch_size) / static_cast<double>(n_);
}

JobControlLoop::SyncSetting JobControlLoop::ChooseSync(const std::vector<double>& times) const {
  const bool measured = AllMeasured(times);
  switch (spec_.synchronization.policy) {
    case api::SyncPolicy::kSsgd:
      return {api::SyncMode::kSsgd, n_, {}};
    case api::SyncPolicy::kAsgd:
      return {api::SyncMode::kAsgd, 1, {}};
    case api::SyncPolicy::kFixedK: {
      if (!measured) break;
      const int k = std::max(select::StarKStar(times, BatchPerWorker(), NoiseScale()),
                             options_.select.min_k);
      return {api::SyncMode::kFixedK, std::clamp(k, 1, n_), SpeedOrder(times)};
    }
    case api::SyncPolicy::kGroups:
      if (!measured) break;
      return {api::SyncMode::kGroups, n_,
              select::ClusterByTime(times, options_.select.group_threshold_seconds,
                                    options_.select.group_threshold_relative)};
    case api::SyncPolicy::kAuto:
      if (!measured) break;
      return ChooseAutoSync(times).value_or(in_force_.sync);
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
    const std::vector<double>& times) const {
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
  StatusOr<select::Selection> sel = select::Select(in, options_.select);
  if (!sel.ok()) return std::nullopt;  // keep the mode in force
  if (!flagged && sel.value().mode != api::SyncMode::kSsgd) {
    // Nobody the detector flags (or AMP is handling them): leave SSGD only for a clear
    // gain (noise must not switch modes; with half of the workers slow the detector's
    // typical worker is slow too, so it flags nobody) between workers really slower
    // than others.
    const auto [tmin, tmax] = std::minmax_element(times.begin(), times.end());
    if (*tmax < options_.auto_min_spread * *tmin) return ssgd;
    if (!(sel.value().estimated_seconds_per_progress <
          (1 - options_.auto_switch_margin) * SsgdCost(sel.value()))) {
      return ssgd;
    }
  }
  return FromSelection(sel.value(), times);
}

JobControlLoop::SyncSetting JobControlLoop::FromSelection(const select::Selection& sel,
                                                         const std::vector<double>& times) const {
  SyncSetting s{sel.mode, std::clamp(sel.k, 1, n_), {}};
  if (s.mode == api::SyncMode::kFixedK) {
    s.groups = SpeedOrder(times);
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
