// Per-worker statistics of the control loop: the report window, compute per sample with
// and without AMP, iteration times, and what they say about AMP and the noise scale.
#include <algorithm>
#include <numeric>

#include "star/operator/control_loop.h"

namespace star::op {

void JobControlLoop::RecordSample(const api::WorkerReport& r) {
  WorkerData& wd = workers_[static_cast<size_t>(r.worker)];
  wd.last_iteration = r.iteration;
  ++wd.reports;
  const size_t cap = static_cast<size_t>(options_.time_window);
  if (wd.iteration_seconds.size() < cap) {
    wd.iteration_seconds.push_back(r.iteration_seconds());
    wd.batch_compute.emplace_back(r.local_batch, r.compute_seconds);
    wd.batch_amp.push_back(r.amp);
  } else {
    wd.iteration_seconds[static_cast<size_t>(wd.next)] = r.iteration_seconds();
    wd.batch_compute[static_cast<size_t>(wd.next)] = {r.local_batch, r.compute_seconds};
    wd.batch_amp[static_cast<size_t>(wd.next)] = r.amp;
  }
  wd.next = static_cast<int>((static_cast<size_t>(wd.next) + 1) % cap);
  max_iteration_ = std::max(max_iteration_, r.iteration);
  wd.lookahead = r.lookahead.value_or(0);
  if (r.pipeline) wd.pipeline = r.pipeline;
  latest_time_ = std::max(latest_time_, r.time_seconds);
  // Exponential moving averages of compute per sample, with and without AMP.
  constexpr double kAlpha = 0.3;
  const double per_sample = r.compute_seconds / r.local_batch;
  double& ema = r.amp ? wd.ema_amp : wd.ema_fp32;
  ema = ema > 0 ? (1 - kAlpha) * ema + kAlpha * per_sample : per_sample;
  if (r.amp) {
    ++wd.amp_samples;
  } else {
    wd.newest_fp32[0] = wd.newest_fp32[1];
    wd.newest_fp32[1] = per_sample;
  }
}

std::optional<double> JobControlLoop::estimated_tta_seconds() const {
  const auto& target = spec_.training.target_accuracy;
  if (tta_) return tta_;
  const auto& max = spec_.training.max_iterations;
  if (!target || !max || max_iteration_ <= 0 || latest_time_ <= 0) return std::nullopt;
  return latest_time_ * static_cast<double>(*max) / static_cast<double>(max_iteration_);
}

int64_t JobControlLoop::UpdateBatch(int worker) const {
  const std::vector<int64_t>& batches = in_force_.batches;
  switch (in_force_.sync.mode) {
    case api::SyncMode::kSsgd:
      return spec_.training.global_batch_size;
    case api::SyncMode::kAsgd:
      return batches[static_cast<size_t>(worker)];
    case api::SyncMode::kFixedK:
      return std::accumulate(batches.begin(), batches.end(), int64_t{0}) * in_force_.sync.k / n_;
    case api::SyncMode::kGroups:
      for (const auto& g : in_force_.sync.groups) {
        if (std::find(g.begin(), g.end(), worker) == g.end()) continue;
        int64_t sum = 0;
        for (int w : g) sum += batches[static_cast<size_t>(w)];
        return sum;
      }
      return batches[static_cast<size_t>(worker)];
  }
  return spec_.training.global_batch_size;
}

void JobControlLoop::ObserveNoise(const api::WorkerReport& r) {
  if (!r.local_grad_sq_norm || !r.global_grad_sq_norm) return;
  const double b_small = r.local_batch;
  const double b_big = static_cast<double>(UpdateBatch(r.worker));
  if (!(b_big > b_small)) return;  // no aggregation: nothing to learn
  // Inputs were checked; a rejected observation leaves the estimator unchanged.
  (void)noise_.Observe(b_small, *r.local_grad_sq_norm, b_big, *r.global_grad_sq_norm);
}

double JobControlLoop::ComputePerSample(int worker) const {
  const auto& bc = workers_[static_cast<size_t>(worker)].batch_compute;
  if (bc.empty()) return 0;
  double sum = 0;
  for (const auto& [b, t] : bc) sum += t / b;
  return sum / static_cast<double>(bc.size());
}

void JobControlLoop::MeasureAmpSpeedup(int worker) {
  // AMP's speedup, measured once per episode a detection window after AMP went on,
  // under the contention that triggered it.
  WorkerData& wd = workers_[static_cast<size_t>(worker)];
  const int64_t since = amp_on_round_[static_cast<size_t>(worker)];
  if (!amp_.Enabled(worker) || wd.amp_speedup > 0 || since < 0 ||
      rounds_ - since < spec_.mitigation.detection.window || wd.amp_samples < 3 ||
      wd.fp32_at_amp_on <= 0 || wd.ema_amp <= 0) {
    return;
  }
  const double ratio = wd.fp32_at_amp_on / wd.ema_amp;
  wd.amp_speedup = std::max(1.0, ratio);
  // Slower with AMP than without it under the same contention: AMP is no remedy here.
  if (ratio < 1) wd.amp_hurts = true;
}

bool JobControlLoop::StillContended(int worker, double typical) const {
  const WorkerData& wd = workers_[static_cast<size_t>(worker)];
  if (wd.amp_speedup <= 0) return true;  // AMP is settling: keep it
  return typical > 0 && wd.ema_amp * wd.amp_speedup > options_.amp_release_slowdown * typical;
}

double JobControlLoop::AmpEquivalentSlowdown(int worker, double typical) const {
  const WorkerData& wd = workers_[static_cast<size_t>(worker)];
  if (wd.amp_speedup <= 0 || typical <= 0) return detector_.View(worker).slowdown;
  return wd.ema_amp * wd.amp_speedup / typical;
}

double JobControlLoop::TypicalComputePerSample() const {
  // The median over workers running full precision (all workers if every one runs AMP).
  std::vector<double> v;
  for (int i = 0; i < n_; ++i) {
    const double c = ComputePerSample(i);
    if (c > 0 && !amp_.Enabled(i)) v.push_back(c);
  }
  if (v.empty()) {
    for (int i = 0; i < n_; ++i) {
      const double c = ComputePerSample(i);
      if (c > 0) v.push_back(c);
    }
  }
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

bool JobControlLoop::ReallocationPending(int worker) const {
  if (!spec_.mitigation.resource_reallocation.enabled) return false;
  for (const ResourceNeed& n : needs_.workers) {
    if (n.worker != worker || n.cause != api::StragglerCause::kCommunication) continue;
    const NeedHold& hold = need_holds_[static_cast<size_t>(worker)];
    return !hold.unmet && hold.since_round >= 0 && rounds_ - hold.since_round < spec_.mitigation.detection.window;
  }
  return false;
}

std::vector<int> JobControlLoop::ModeStragglers() const {
  std::vector<int> out;
  const bool amp_enabled = spec_.mitigation.amp.enabled;
  const int settle = spec_.mitigation.detection.window;
  for (int w : detector_.Stragglers()) {
    const detect::WorkerView v = detector_.View(w);
    if (amp_enabled && v.cause == api::StragglerCause::kCompute) {
      const int64_t since = amp_on_round_[static_cast<size_t>(w)];
      // AMP goes on at the decision's apply iteration: give it a detection window of
      // reports run with AMP to show.
      if (!amp_.Enabled(w) || since < 0 || workers_[static_cast<size_t>(w)].amp_samples < settle) {
        continue;
      }
    }
    if (v.cause == api::StragglerCause::kCommunication && ReallocationPending(w)) continue;
    out.push_back(w);
  }
  return out;
}

namespace {

// The median of `v` (the mean of the middle two for an even count); reorders `v`.
double MedianOf(std::vector<double>& v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return 0.5 * (*std::max_element(v.begin(), mid) + *mid);
}

}  // namespace

std::vector<double> JobControlLoop::MedianIterationSeconds() const {
  std::vector<double> t(static_cast<size_t>(n_), 0);
  for (size_t i = 0; i < t.size(); ++i) {
    // The detector's level once it has one (its windowed median: robust; a new
    // straggler's step level until its window shows the step: as recent as the
    // detection itself), else the median of the reports so far without the first. A
    // worker's first report holds its startup (a first iteration several times the
    // next); counted in, it can rank a fast worker behind a straggler's step level, and
    // fixed_k's ring then takes the straggler and leaves the fast worker out.
    const detect::WorkerView v = detector_.View(static_cast<int>(i));
    if ((v.ready || v.straggler) && v.level_seconds > 0) {
      t[i] = v.level_seconds;
      continue;
    }
    const WorkerData& wd = workers_[i];
    std::vector<double> s = wd.iteration_seconds;
    // Until the window wraps, the first report is s[0].
    if (s.size() > 1 && wd.reports == static_cast<int64_t>(s.size())) s.erase(s.begin());
    if (!s.empty()) t[i] = MedianOf(s);
  }
  return t;
}

double JobControlLoop::RecentMedianSeconds(int worker, int count) const {
  const WorkerData& wd = workers_[static_cast<size_t>(worker)];
  const size_t size = wd.iteration_seconds.size();
  if (count < 1 || wd.reports <= count || size < static_cast<size_t>(count)) return 0;
  std::vector<double> s;
  // The newest report sits just before `next` (which is `size` until the window wraps).
  for (size_t i = 1; i <= static_cast<size_t>(count); ++i) {
    s.push_back(wd.iteration_seconds[(static_cast<size_t>(wd.next) + size - i) % size]);
  }
  return MedianOf(s);
}

std::vector<double> JobControlLoop::RingSeconds(std::vector<double> times) const {
  constexpr int kRecentReports = 3;
  const double step = detector_.options().min_slowdown;
  for (size_t i = 0; i < times.size(); ++i) {
    const double recent = RecentMedianSeconds(static_cast<int>(i), kRecentReports);
    if (times[i] > 0 && recent >= step * times[i]) times[i] = recent;
  }
  return times;
}

int64_t JobControlLoop::MinIteration() const {
  int64_t m = workers_.empty() ? -1 : workers_[0].last_iteration;
  for (const WorkerData& wd : workers_) m = std::min(m, wd.last_iteration);
  return m;
}

}  // namespace star::op
