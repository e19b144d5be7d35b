#include "star/operator/control_loop.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <sstream>

#include "star/core/batch/planner.h"
#include "star/core/select/clustering.h"
#include "star/core/select/cost_model.h"

namespace star::op {
namespace {

detect::Rule ToDetectRule(api::DetectionRule r) {
  switch (r) {
    case api::DetectionRule::kMad: return detect::Rule::kMad;
    case api::DetectionRule::kRelativeScore: return detect::Rule::kRelativeScore;
    case api::DetectionRule::kStar: return detect::Rule::kStar;
    case api::DetectionRule::kChangePoint: return detect::Rule::kChangePoint;
  }
  return detect::Rule::kMad;
}

bool Finite(double x) { return std::isfinite(x); }

std::string GroupsString(const std::vector<std::vector<int>>& groups) {
  std::ostringstream os;
  os << '[';
  for (size_t g = 0; g < groups.size(); ++g) {
    os << (g ? ",[" : "[");
    for (size_t i = 0; i < groups[g].size(); ++i) os << (i ? "," : "") << groups[g][i];
    os << ']';
  }
  os << ']';
  return os.str();
}

std::string BatchesString(const std::vector<int64_t>& b) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < b.size(); ++i) os << (i ? "," : "") << b[i];
  os << ']';
  return os.str();
}

std::vector<int64_t> EqualBatches(int64_t global, int n) {
  std::vector<int64_t> b(static_cast<size_t>(n), global / n);
  for (int64_t i = 0; i < global % n; ++i) ++b[static_cast<size_t>(i)];
  return b;
}

double Makespan(const std::vector<batch::WorkerModel>& m, const std::vector<int64_t>& b) {
  double worst = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    worst = std::max(worst, m[i].alpha * static_cast<double>(b[i]) + m[i].beta);
  }
  return worst;
}

}  // namespace

StatusOr<JobControlLoop> JobControlLoop::Create(const api::TrainingJobSpec& spec,
                                                LoopOptions options) {
  STAR_RETURN_IF_ERROR(api::Validate(spec));
  if (options.decide_every_rounds < 1) {
    return Status::InvalidArgument("options.decide_every_rounds: must be >= 1, got " +
                                   std::to_string(options.decide_every_rounds));
  }
  if (options.apply_margin_iterations < 0) {
    return Status::InvalidArgument("options.apply_margin_iterations: must be >= 0, got " +
                                   std::to_string(options.apply_margin_iterations));
  }
  if (options.time_window < 1) {
    return Status::InvalidArgument("options.time_window: must be >= 1, got " +
                                   std::to_string(options.time_window));
  }
  if (!(options.default_noise_scale >= 0) || !Finite(options.default_noise_scale)) {
    return Status::InvalidArgument("options.default_noise_scale: must be finite and >= 0");
  }
  if (options.warmup_iterations < 0) {
    return Status::InvalidArgument("options.warmup_iterations: must be >= 0, got " +
                                   std::to_string(options.warmup_iterations));
  }
  if (!(options.auto_min_spread >= 1) || !Finite(options.auto_min_spread)) {
    return Status::InvalidArgument("options.auto_min_spread: must be finite and >= 1");
  }
  if (!(options.auto_switch_margin >= 0 && options.auto_switch_margin < 1)) {
    return Status::InvalidArgument("options.auto_switch_margin: must be in [0, 1)");
  }
  if (options.mode_dwell_rounds < 0) {
    return Status::InvalidArgument("options.mode_dwell_rounds: must be >= 0, got " +
                                   std::to_string(options.mode_dwell_rounds));
  }
  if (!(options.amp_release_slowdown >= 1) || !Finite(options.amp_release_slowdown)) {
    return Status::InvalidArgument("options.amp_release_slowdown: must be finite and >= 1");
  }
  if (!(options.min_batch_gain >= 0 && options.min_batch_gain < 1)) {
    return Status::InvalidArgument("options.min_batch_gain: must be in [0, 1)");
  }
  const api::DetectionSpec& det = spec.mitigation.detection;
  options.detector.rule = ToDetectRule(det.rule);
  options.detector.window = det.window;
  options.detector.threshold = det.threshold.value_or(0);
  if (Status s = detect::Validate(options.detector); !s.ok()) {
    return s.WithPrefix("spec.mitigation.detection");
  }
  options.amp.enabled = spec.mitigation.amp.enabled;
  if (Status s = amp::Validate(options.amp); !s.ok()) return s.WithPrefix("options.amp");
  options.select.min_k = spec.synchronization.min_k.value_or(1);
  if (Status s = select::Validate(options.select); !s.ok()) {
    return s.WithPrefix("options.select");
  }
  STAR_ASSIGN_OR_RETURN(converge::NoiseScaleEstimator noise,
                        converge::NoiseScaleEstimator::Create(options.noise_scale));
  amp::AmpPolicy amp(options.amp);
  JobControlLoop loop(spec, std::move(options), std::move(amp));
  loop.noise_ = std::move(noise);
  return loop;
}

JobControlLoop::JobControlLoop(api::TrainingJobSpec spec, LoopOptions options,
                               amp::AmpPolicy amp)
    : spec_(std::move(spec)),
      options_(std::move(options)),
      n_(spec_.workers.replicas),
      detector_(options_.detector),
      amp_(std::move(amp)),
      workers_(static_cast<size_t>(n_)),
      reported_(static_cast<size_t>(n_), false),
      k_(n_),
      amp_state_(static_cast<size_t>(n_), false),
      batches_(EqualBatches(spec_.training.global_batch_size, n_)),
      amp_on_round_(static_cast<size_t>(n_), -1) {}

Status JobControlLoop::Resume(const api::Decision& d) {
  if (rounds_ > 0 || max_iteration_ >= 0) {
    return Status::InvalidArgument("decision: a loop resumes before any report");
  }
  STAR_RETURN_IF_ERROR(api::Validate(d, "decision"));
  if (static_cast<int>(d.workers.size()) != n_) {
    return Status::InvalidArgument("decision.workers: must have one entry per worker (" +
                                   std::to_string(n_) + "), got " + std::to_string(d.workers.size()));
  }
  std::vector<bool> amp(static_cast<size_t>(n_), false);
  std::vector<int64_t> batches(static_cast<size_t>(n_), 0);
  for (const api::WorkerSetting& w : d.workers) {
    if (w.worker < 0 || w.worker >= n_ || batches[static_cast<size_t>(w.worker)] != 0) {
      return Status::InvalidArgument("decision.workers: must list each rank in [0, " + std::to_string(n_) +
                                     ") once, got rank " + std::to_string(w.worker));
    }
    amp[static_cast<size_t>(w.worker)] = w.amp;
    batches[static_cast<size_t>(w.worker)] = w.batch;
  }
  for (const auto& g : d.groups) {
    for (int r : g) {
      if (r < 0 || r >= n_) {
        return Status::InvalidArgument("decision.groups: rank " + std::to_string(r) + " outside [0, " +
                                       std::to_string(n_) + ")");
      }
    }
  }
  if (d.k > n_) {
    return Status::InvalidArgument("decision.k: must be <= " + std::to_string(n_) + ", got " + std::to_string(d.k));
  }
  for (int i = 0; i < n_; ++i) {
    if (spec_.mitigation.amp.enabled) amp_.Restore(i, amp[static_cast<size_t>(i)]);
    if (amp[static_cast<size_t>(i)]) {
      amp_on_round_[static_cast<size_t>(i)] = 0;
      // AMP's speedup was measured by the earlier loop: taken as none, so AMP stays on
      // only while the worker is slow even with it (else it goes off, and on again with
      // a fresh measurement if the contention is still there).
      workers_[static_cast<size_t>(i)].amp_speedup = 1;
    }
  }
  mode_ = d.mode;
  k_ = d.k;
  groups_ = d.groups;
  amp_state_ = std::move(amp);
  batches_ = std::move(batches);
  // Unequal batches mean batch adaptation was on.
  adapt_batches_ = batches_ != EqualBatches(spec_.training.global_batch_size, n_);
  last_mode_round_ = 0;
  decision_ = d;
  return Status::Ok();
}

Status JobControlLoop::CheckReport(const api::WorkerReport& r) const {
  auto bad = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument(field + ": " + why);
  };
  if (r.worker < 0 || r.worker >= n_) {
    return bad("worker", "must be in [0, " + std::to_string(n_) + "), got " +
                             std::to_string(r.worker));
  }
  if (r.iteration < 0) return bad("iteration", "must be >= 0, got " + std::to_string(r.iteration));
  const int64_t prev = workers_[static_cast<size_t>(r.worker)].last_iteration;
  if (r.iteration < prev) {
    return bad("iteration", "must be >= the worker's previous report (" + std::to_string(prev) +
                                "), got " + std::to_string(r.iteration));
  }
  if (r.iterations < 1) {
    return bad("iterations", "must be >= 1, got " + std::to_string(r.iterations));
  }
  const std::pair<const char*, double> times[] = {
      {"time_seconds", r.time_seconds},
      {"compute_seconds", r.compute_seconds},
      {"communication_seconds", r.communication_seconds},
      {"wait_seconds", r.wait_seconds}};
  for (const auto& [name, v] : times) {
    if (!Finite(v) || v < 0) return bad(name, "must be finite and >= 0");
  }
  if (r.local_batch < 1) {
    return bad("local_batch", "must be >= 1, got " + std::to_string(r.local_batch));
  }
  if (r.local_grad_sq_norm && (!Finite(*r.local_grad_sq_norm) || *r.local_grad_sq_norm < 0)) {
    return bad("local_grad_sq_norm", "must be finite and >= 0");
  }
  if (r.global_grad_sq_norm &&
      (!Finite(*r.global_grad_sq_norm) || *r.global_grad_sq_norm < 0)) {
    return bad("global_grad_sq_norm", "must be finite and >= 0");
  }
  return Status::Ok();
}

int64_t JobControlLoop::UpdateBatch(int worker) const {
  switch (mode_) {
    case api::SyncMode::kSsgd:
      return spec_.training.global_batch_size;
    case api::SyncMode::kAsgd:
      return batches_[static_cast<size_t>(worker)];
    case api::SyncMode::kFixedK:
      return std::accumulate(batches_.begin(), batches_.end(), int64_t{0}) * k_ / n_;
    case api::SyncMode::kGroups:
      for (const auto& g : groups_) {
        if (std::find(g.begin(), g.end(), worker) == g.end()) continue;
        int64_t sum = 0;
        for (int w : g) sum += batches_[static_cast<size_t>(w)];
        return sum;
      }
      return batches_[static_cast<size_t>(worker)];
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

StatusOr<std::optional<api::Decision>> JobControlLoop::Observe(const api::WorkerReport& r) {
  STAR_RETURN_IF_ERROR(CheckReport(r));
  const size_t w = static_cast<size_t>(r.worker);
  WorkerData& wd = workers_[w];
  wd.last_iteration = r.iteration;
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
  {
    // Exponential moving averages of compute per sample, with and without AMP.
    constexpr double kAlpha = 0.3;
    const double per_sample = r.compute_seconds / r.local_batch;
    double& ema = r.amp ? wd.ema_amp : wd.ema_fp32;
    ema = ema > 0 ? (1 - kAlpha) * ema + kAlpha * per_sample : per_sample;
    if (r.amp) ++wd.amp_samples;
  }
  ObserveNoise(r);

  bool decide = false;
  std::vector<detect::Event> events;
  // Warm-up iterations (allocator, caches, connections) say nothing about stragglers.
  if (r.iteration > options_.warmup_iterations) detector_.Observe(r, &events);
  for (const detect::Event& e : events) {
    decide = true;
    if (e.state == detect::State::kStraggler) {
      if (e.kind == api::StragglerKind::kStatic && spec_.mitigation.batch_adaptation.enabled) {
        adapt_batches_ = true;
      }
      std::ostringstream detail;
      detail << "cause=" << api::ToString(e.cause) << " kind=" << api::ToString(e.kind)
             << " slowdown=" << std::round(e.slowdown * 100) / 100;
      timeline_.push_back({r.time_seconds, "straggler", e.worker, detail.str()});
    } else {
      timeline_.push_back({r.time_seconds, "recovered", e.worker, ""});
    }
  }

  if (!reported_[w]) {
    reported_[w] = true;
    ++reported_count_;
  }
  if (reported_count_ == n_) {
    ++rounds_;
    std::fill(reported_.begin(), reported_.end(), false);
    reported_count_ = 0;
    std::vector<amp::AmpPolicy::Change> changes;
    const double typical = TypicalComputePerSample();
    for (int i = 0; i < n_; ++i) MeasureAmpSpeedup(i);
    for (int i = 0; i < n_; ++i) {
      const detect::WorkerView v = detector_.View(i);
      bool straggling = v.straggler;
      api::StragglerCause cause = v.cause;
      // AMP hides the contention it offsets: a worker running AMP no longer looks slow.
      // It keeps AMP while its full-precision equivalent (compute per sample with AMP x
      // AMP's measured speedup) is still slow next to the typical worker.
      if (amp_.Enabled(i) && !(straggling && cause == api::StragglerCause::kCompute) &&
          StillContended(i, typical)) {
        straggling = true;
        cause = api::StragglerCause::kCompute;
      }
      // Iterations are non-decreasing per worker (checked), so this cannot fail.
      (void)amp_.Observe(i, straggling, cause, workers_[static_cast<size_t>(i)].last_iteration,
                         &changes);
    }
    for (const auto& c : changes) {
      last_amp_change_round_ = rounds_;
      WorkerData& cw = workers_[static_cast<size_t>(c.worker)];
      if (c.amp) {
        amp_on_round_[static_cast<size_t>(c.worker)] = rounds_;
        cw.fp32_at_amp_on = cw.ema_fp32;
        cw.ema_amp = 0;
        cw.amp_samples = 0;
        cw.amp_speedup = 0;
      }
    }
    if (!changes.empty()) decide = true;
    if (rounds_ % options_.decide_every_rounds == 0) decide = true;
  }
  if (redecide_ && decision_ && MinIteration() >= decision_->apply_at_iteration) decide = true;
  if (decide) Decide(r.time_seconds);
  return decision_;
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
  wd.amp_speedup = std::max(1.0, wd.fp32_at_amp_on / wd.ema_amp);
}

bool JobControlLoop::StillContended(int worker, double typical) const {
  const WorkerData& wd = workers_[static_cast<size_t>(worker)];
  if (wd.amp_speedup <= 0) return true;  // AMP is settling: keep it
  return typical > 0 && wd.ema_amp * wd.amp_speedup > options_.amp_release_slowdown * typical;
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

std::vector<int> JobControlLoop::ModeStragglers() const {
  std::vector<int> out;
  const bool amp_enabled = spec_.mitigation.amp.enabled;
  const int settle = spec_.mitigation.detection.window;
  for (int w : detector_.Stragglers()) {
    const detect::WorkerView v = detector_.View(w);
    if (amp_enabled && v.cause == api::StragglerCause::kCompute) {
      const int64_t since = amp_on_round_[static_cast<size_t>(w)];
      // AMP goes on at the next round close; give it a detection window to show.
      if (!amp_.Enabled(w) || since < 0 || rounds_ - since < settle) continue;
    }
    out.push_back(w);
  }
  return out;
}

std::vector<double> JobControlLoop::MeanTimes() const {
  std::vector<double> t(static_cast<size_t>(n_), 0);
  for (size_t i = 0; i < t.size(); ++i) {
    // The detector's windowed median once it has one (robust, and as recent as the
    // detection itself), else the mean of the reports so far.
    const detect::WorkerView v = detector_.View(static_cast<int>(i));
    if (v.ready && v.median_seconds > 0) {
      t[i] = v.median_seconds;
      continue;
    }
    const auto& s = workers_[i].iteration_seconds;
    if (!s.empty()) t[i] = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
  }
  return t;
}

std::vector<int64_t> JobControlLoop::PlanWorkerBatches(
    const std::vector<int64_t>& current) const {
  const int64_t global = spec_.training.global_batch_size;
  if (!adapt_batches_) return EqualBatches(global, n_);
  batch::PlanInput in;
  in.global_batch = global;
  in.min_batch = spec_.mitigation.batch_adaptation.min_local_batch;
  for (int w = 0; w < n_; ++w) {
    const WorkerData& wd = workers_[static_cast<size_t>(w)];
    // Only samples taken in the worker's current AMP state describe its speed now.
    const bool amp_now = amp_.Enabled(w);
    std::vector<std::pair<double, double>> samples;
    for (size_t j = 0; j < wd.batch_compute.size(); ++j) {
      if (wd.batch_amp[j] == amp_now) samples.push_back(wd.batch_compute[j]);
    }
    if (samples.empty()) samples = wd.batch_compute;
    batch::WorkerModel m;
    std::set<double> sizes;
    for (const auto& [b, t] : samples) sizes.insert(b);
    if (sizes.size() >= 2) {
      StatusOr<batch::WorkerModel> fit = batch::FitLinear(samples);
      if (fit.ok()) m = fit.value();
    } else if (!samples.empty()) {
      double per_sample = 0;
      for (const auto& [b, t] : samples) per_sample += t / b;
      m.alpha = per_sample / static_cast<double>(samples.size());
    }
    in.workers.push_back(m);
  }
  StatusOr<batch::BatchPlan> plan = batch::PlanBatches(in);
  if (!plan.ok()) return current;
  const double old_span = Makespan(in.workers, current);
  if (plan.value().makespan_seconds < old_span * (1 - options_.min_batch_gain)) {
    return plan.value().batches;
  }
  return current;
}

int64_t JobControlLoop::MinIteration() const {
  int64_t m = workers_.empty() ? -1 : workers_[0].last_iteration;
  for (const WorkerData& wd : workers_) m = std::min(m, wd.last_iteration);
  return m;
}

void JobControlLoop::Decide(double t) {
  // A decision replaces the previous one only after every worker has passed the
  // previous one's iteration: a worker that never saw it (it reports the newest only)
  // would otherwise skip a switch the others make.
  if (decision_ && MinIteration() < decision_->apply_at_iteration) {
    redecide_ = true;
    return;
  }
  redecide_ = false;
  const std::vector<double> times = MeanTimes();
  const bool measured =
      std::all_of(times.begin(), times.end(), [](double x) { return x > 0 && std::isfinite(x); });
  const double phi = noise_.NoiseScale().value_or(options_.default_noise_scale);
  const double batch_per_worker =
      static_cast<double>(spec_.training.global_batch_size) / static_cast<double>(n_);

  api::SyncMode mode = mode_;
  int k = k_;
  std::vector<std::vector<int>> groups = groups_;
  // Workers fastest first (ties by rank), for fixed_k.
  auto speed_order = [&] {
    std::vector<int> order(static_cast<size_t>(n_));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return times[static_cast<size_t>(a)] < times[static_cast<size_t>(b)];
    });
    return std::vector<std::vector<int>>{order};
  };
  switch (spec_.synchronization.policy) {
    case api::SyncPolicy::kSsgd:
      mode = api::SyncMode::kSsgd, k = n_, groups.clear();
      break;
    case api::SyncPolicy::kAsgd:
      mode = api::SyncMode::kAsgd, k = 1, groups.clear();
      break;
    case api::SyncPolicy::kFixedK:
      if (measured) {
        mode = api::SyncMode::kFixedK;
        k = std::clamp(std::max(select::StarKStar(times, batch_per_worker, phi),
                                options_.select.min_k),
                       1, n_);
        groups = speed_order();
      }
      break;
    case api::SyncPolicy::kGroups:
      if (measured) {
        mode = api::SyncMode::kGroups, k = n_;
        groups = select::ClusterByTime(times, options_.select.group_threshold_seconds,
                                       options_.select.group_threshold_relative);
      }
      break;
    case api::SyncPolicy::kAuto: {
      if (!measured) break;
      const bool flagged = !ModeStragglers().empty();
      const std::vector<bool> amp_now = amp_.States(n_);
      const bool amp_in_play =
          std::find(amp_now.begin(), amp_now.end(), true) != amp_now.end() ||
          (last_amp_change_round_ >= 0 &&
           rounds_ - last_amp_change_round_ < spec_.mitigation.detection.window);
      if (!flagged && (!detector_.Stragglers().empty() || amp_in_play)) {
        // Every straggler is AMP's to fix for now, or AMP runs somewhere (its workers'
        // times are not what they will be without it): stay synchronous meanwhile.
        mode = api::SyncMode::kSsgd, k = n_, groups.clear();
        break;
      }
      if (mode_ != api::SyncMode::kSsgd && last_mode_round_ >= 0 &&
          rounds_ - last_mode_round_ < options_.mode_dwell_rounds) {
        break;  // recently switched: let it settle
      }
      select::SelectionInput in{spec_.architecture, batch_per_worker, phi, times};
      StatusOr<select::Selection> sel = select::Select(in, options_.select);
      if (!sel.ok()) break;  // keep the mode in force
      const auto [tmin, tmax] = std::minmax_element(times.begin(), times.end());
      if (!flagged && sel.value().mode != api::SyncMode::kSsgd &&
          *tmax < options_.auto_min_spread * *tmin) {
        // No worker is really slower than another: noise.
        mode = api::SyncMode::kSsgd, k = n_, groups.clear();
        break;
      }
      if (!flagged && sel.value().mode != api::SyncMode::kSsgd) {
        // Nobody the detector flags (or AMP is handling them): leave SSGD only for a
        // clear gain (noise must not switch modes; with half of the workers slow the
        // detector's typical worker is slow too, so it flags nobody).
        double ssgd_cost = 0;
        for (const auto& c : sel.value().candidates) {
          if (c.mode == api::SyncMode::kSsgd) ssgd_cost = c.estimated_seconds_per_progress;
        }
        if (!(sel.value().estimated_seconds_per_progress <
              (1 - options_.auto_switch_margin) * ssgd_cost)) {
          mode = api::SyncMode::kSsgd, k = n_, groups.clear();
          break;
        }
      }
      mode = sel.value().mode;
      k = std::clamp(sel.value().k, 1, n_);
      if (mode == api::SyncMode::kSsgd || mode == api::SyncMode::kAsgd) {
        groups.clear();
      } else if (mode == api::SyncMode::kFixedK) {
        groups = speed_order();
      } else {
        groups = sel.value().groups;
      }
      break;
    }
  }

  // fixed_k: a new speed order among equally placed workers (noise) is no change as
  // long as the ring (the first k) keeps the same members.
  if (mode == api::SyncMode::kFixedK && mode_ == mode && k == k_ && groups_.size() == 1 &&
      groups.size() == 1) {
    std::vector<int> a(groups[0].begin(), groups[0].begin() + k);
    std::vector<int> b(groups_[0].begin(), groups_[0].begin() + k);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a == b) groups = groups_;
  }

  std::vector<bool> amp_state = amp_.States(n_);
  std::vector<int64_t> batches = PlanWorkerBatches(batches_);

  const bool mode_changed = mode != mode_ || k != k_ || groups != groups_;
  if (mode_changed) last_mode_round_ = rounds_;
  const bool batches_changed = batches != batches_;
  if (!mode_changed && !batches_changed && amp_state == amp_state_) return;

  api::Decision d;
  d.epoch = std::max(decision_ ? decision_->epoch : 0, epoch_base_) + 1;
  // The margin is in the slowest worker's iterations: in fixed_k, groups and asgd the
  // fastest workers run ahead by the speed ratio, and the slowest must still report
  // (and learn the decision) before the fastest reach it.
  double ratio = 1;
  if (measured) {
    const auto [tmin, tmax] = std::minmax_element(times.begin(), times.end());
    ratio = std::clamp(*tmax / *tmin, 1.0, 50.0);
  }
  d.apply_at_iteration =
      std::max<int64_t>(max_iteration_, 0) +
      static_cast<int64_t>(std::ceil(static_cast<double>(options_.apply_margin_iterations) * ratio));
  d.mode = mode;
  d.k = k;
  d.groups = groups;
  for (int i = 0; i < n_; ++i) {
    d.workers.push_back({i, static_cast<bool>(amp_state[static_cast<size_t>(i)]),
                         batches[static_cast<size_t>(i)]});
  }
  if (!api::Validate(d).ok()) return;  // never hand out an invalid decision

  if (mode_changed) {
    std::ostringstream detail;
    detail << api::ToString(mode) << " k=" << k;
    if (mode == api::SyncMode::kGroups || mode == api::SyncMode::kFixedK) {
      detail << ' ' << GroupsString(groups);
    }
    timeline_.push_back({t, "mode", -1, detail.str()});
  }
  for (int i = 0; i < n_; ++i) {
    const size_t s = static_cast<size_t>(i);
    if (amp_state[s] != amp_state_[s]) {
      timeline_.push_back({t, amp_state[s] ? "amp_on" : "amp_off", i, ""});
    }
  }
  if (batches_changed) timeline_.push_back({t, "batches", -1, BatchesString(batches)});

  mode_ = mode;
  k_ = k;
  groups_ = std::move(groups);
  amp_state_ = std::move(amp_state);
  batches_ = std::move(batches);
  decision_ = std::move(d);
}

}  // namespace star::op
