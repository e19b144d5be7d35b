#include "star/core/detect/detector.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <optional>

#include "cohort.h"

namespace star::detect {
namespace {

using internal::MedianInPlace;
using internal::SlowClassStart;
using internal::SortedMedian;

// Korel's consistency constant: 1.4826 * MAD estimates the standard deviation.
constexpr double kMadToSigma = 1.4826;
// The faster of two speed classes must hold at least this many workers to be the
// cohort's reference (one unusually fast worker is not a class).
constexpr size_t kMinClass = 2;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Statistics of one round's reference workers.
struct Cohort {
  double typical = 0, typical_compute = 0, typical_comm = 0;
  std::optional<double> sigma;         // rule mad only
  std::optional<double> typical_mean;  // rule change_point only
};

// The statistics of workers[id] for the ids in `ready` (not empty), through the scratch
// buffers (each at least ready.size() long). Templated over the detector's private
// worker record.
template <typename Worker>
Cohort CohortOf(const std::vector<Worker>& workers, const std::vector<int>& ready,
                api::DetectionRule rule, std::vector<double>& scratch_a,
                std::vector<double>& scratch_b, std::vector<double>& scratch_c,
                std::vector<double>& scratch_d) {
  const size_t n = ready.size();
  Cohort c;
  for (size_t i = 0; i < n; ++i) {
    const Worker& w = workers[static_cast<size_t>(ready[i])];
    scratch_a[i] = w.med_total;
    scratch_b[i] = w.med_compute;
    scratch_c[i] = w.med_comm;
  }
  c.typical = MedianInPlace(scratch_a.data(), n);
  c.typical_compute = MedianInPlace(scratch_b.data(), n);
  c.typical_comm = MedianInPlace(scratch_c.data(), n);
  if (rule == api::DetectionRule::kMad) {
    for (size_t i = 0; i < n; ++i) {
      scratch_d[i] = std::abs(workers[static_cast<size_t>(ready[i])].med_total - c.typical);
    }
    c.sigma = kMadToSigma * MedianInPlace(scratch_d.data(), n);
  } else if (rule == api::DetectionRule::kChangePoint) {
    for (size_t i = 0; i < n; ++i) {
      scratch_d[i] = workers[static_cast<size_t>(ready[i])].mean_total;
    }
    c.typical_mean = MedianInPlace(scratch_d.data(), n);
  }
  return c;
}

// One more round over the onset threshold; a new streak notes where it started.
template <typename Worker>
void ExtendOnsetStreak(Worker& w) {
  if (w.onset_streak++ == 0) w.streak_start_iteration = w.last_iteration;
}

// Onset confirmed: `w` becomes a straggler of `cause` and `kind`.
template <typename Worker>
void MarkStraggler(Worker& w, api::StragglerCause cause, api::StragglerKind kind) {
  w.straggler = true;
  w.since = w.last_iteration;
  w.event_samples = w.samples;
  w.cause = cause;
  w.kind = kind;
  w.onset_streak = w.recovery_streak = w.cause_streak = 0;
}

// The component whose excess (seconds over a reference) is larger.
api::StragglerCause CauseOf(double compute_excess, double comm_excess) {
  return comm_excess > compute_excess ? api::StragglerCause::kCommunication
                                      : api::StragglerCause::kCompute;
}

template <typename Worker>
void MarkRecovered(Worker& w) {
  w.straggler = false;
  w.since = -1;
  w.onset_streak = w.recovery_streak = w.cause_streak = 0;
}

// For a straggler still clearly slow, given its excess `compute` and `comm` seconds: the
// cause switches once the other one has dominated (by cause_switch_ratio) for
// onset_evaluations rounds, and a dynamic straggler turns static after
// static_after_iterations. Returns whether the cause or the kind changed.
template <typename Worker>
bool Reclassify(Worker& w, double compute, double comm, const DetectorOptions& o) {
  bool changed = false;
  const bool comm_now = w.cause == api::StragglerCause::kCommunication;
  const double current = comm_now ? comm : compute;
  const double other = comm_now ? compute : comm;
  if (other > o.cause_switch_ratio * std::max(current, 0.0)) {
    if (++w.cause_streak >= o.onset_evaluations) {
      w.cause = comm_now ? api::StragglerCause::kCompute : api::StragglerCause::kCommunication;
      w.cause_streak = 0;
      changed = true;
    }
  } else {
    w.cause_streak = 0;
  }
  if (w.kind == api::StragglerKind::kDynamic &&
      w.last_iteration - w.since >= o.static_after_iterations) {
    w.kind = api::StragglerKind::kStatic;
    changed = true;
  }
  return changed;
}

}  // namespace

Detector::Detector(DetectorOptions options) {
  const bool valid = Validate(options).ok();
  assert(valid && "Detector: invalid DetectorOptions (call Validate first)");
  options_ = ResolveDefaults(valid ? options : DetectorOptions{});
  scratch_window_.resize(static_cast<size_t>(options_.window));
}

void Detector::Observe(const api::WorkerReport& report, std::vector<Event>* events) {
  Observe(Sample{report.iteration, report.worker, report.compute_seconds,
                 report.communication_seconds},
          events);
}

void Detector::Observe(const Sample& s, std::vector<Event>* events) {
  if (s.worker < 0 || !std::isfinite(s.compute_seconds) ||
      !std::isfinite(s.communication_seconds) || s.compute_seconds < 0 ||
      s.communication_seconds < 0) {
    return;
  }
  const auto id = static_cast<size_t>(s.worker);
  if (id < workers_.size() && workers_[id].known && s.iteration < workers_[id].last_iteration) {
    return;
  }
  // A sample from a later iteration closes the round once every known worker could
  // have contributed to it.
  if (s.iteration > max_iteration_ && pending_ > 0 && pending_ >= known_workers_) {
    Evaluate(events);
  }
  if (id >= workers_.size()) {
    const size_t n = std::max(id + 1, workers_.size() * 2);
    const auto window = static_cast<size_t>(options_.window);
    workers_.resize(n);
    total_.resize(n * window);
    compute_.resize(n * window);
    comm_.resize(n * window);
    for (auto* v : {&scratch_a_, &scratch_b_, &scratch_c_, &scratch_d_}) v->resize(n);
    ready_.reserve(n);
    in_window_.resize(n);
  }
  num_workers_ = std::max(num_workers_, s.worker + 1);
  Worker& w = workers_[id];
  if (!w.known) {
    w.known = true;
    ++known_workers_;
  }
  if (s.iteration > max_iteration_) {
    at_max_ = 1;
  } else if (s.iteration == max_iteration_ && w.last_iteration != max_iteration_) {
    ++at_max_;
  }
  const size_t slot = id * static_cast<size_t>(options_.window) + static_cast<size_t>(w.head);
  total_[slot] = s.compute_seconds + s.communication_seconds;
  compute_[slot] = s.compute_seconds;
  comm_[slot] = s.communication_seconds;
  w.head = w.head + 1 == options_.window ? 0 : w.head + 1;
  w.count = std::min(w.count + 1, options_.window);
  w.dirty = true;
  ++w.samples;
  w.last_iteration = s.iteration;
  max_iteration_ = std::max(max_iteration_, s.iteration);
  ++pending_;
  // Every known worker has reported the newest iteration: the round is complete now.
  if (at_max_ >= known_workers_ && pending_ >= known_workers_) Evaluate(events);
}

void Detector::Flush(std::vector<Event>* events) {
  if (pending_ > 0) Evaluate(events);
}

void Detector::UpdateWorkerStats(int id) {
  Worker& w = workers_[static_cast<size_t>(id)];
  const auto n = static_cast<size_t>(w.count);
  const size_t base = static_cast<size_t>(id) * static_cast<size_t>(options_.window);
  double* scratch = scratch_window_.data();
  auto median_of = [&](const std::vector<double>& ring, double* sum) {
    double acc = 0;
    for (size_t i = 0; i < n; ++i) {
      scratch[i] = ring[base + i];
      acc += scratch[i];
    }
    if (sum != nullptr) *sum = acc;
    return MedianInPlace(scratch, n);
  };
  double sum = 0;
  w.med_total = median_of(total_, &sum);
  w.mean_total = sum / static_cast<double>(n);
  w.med_compute = median_of(compute_, nullptr);
  w.med_comm = median_of(comm_, nullptr);
  // Only mad and relative look at the newest samples: star's narrow hysteresis band
  // (0.2 / 0.1 over the fastest) needs the full window's median not to flap, and
  // change_point compares means.
  const size_t m = ShortLevel() ? std::min(n, static_cast<size_t>(options_.onset_window)) : n;
  auto newest_median = [&](const std::vector<double>& ring) {
    for (size_t i = 0; i < m; ++i) scratch[i] = ring[Newest(w, id, i)];
    return MedianInPlace(scratch, m);
  };
  if (m == n) {  // the whole window: its medians
    w.level_total = w.med_total;
    w.level_compute = w.med_compute;
    w.level_comm = w.med_comm;
  } else {
    w.level_total = newest_median(total_);
    w.level_compute = newest_median(compute_);
    w.level_comm = newest_median(comm_);
  }
  if (w.best_total == 0 || w.med_total < w.best_total) {
    w.best_total = w.med_total;
    w.best_compute = w.med_compute;
    w.best_comm = w.med_comm;
  }
  w.dirty = false;
}

bool Detector::ShortLevel() const {
  return options_.onset_window > 0 && options_.onset_window < options_.window &&
         (options_.rule == api::DetectionRule::kMad ||
          options_.rule == api::DetectionRule::kRelativeScore);
}

double Detector::OnsetFloor(const Worker& w) const {
  if (w.baseline <= 0) return options_.static_slowdown;
  return std::max(options_.min_slowdown, w.baseline * options_.min_slowdown);
}

double Detector::RecoveryFloor(const Worker& w) const {
  return std::max(options_.recovery_slowdown, w.baseline * options_.recovery_slowdown);
}

bool Detector::OnsetCondition(const Worker& w, double mad_floor) const {
  if (w.level_total <= 0) return false;
  switch (options_.rule) {
    case api::DetectionRule::kMad:
      // sigma_ == 0: no spread estimate, nobody is flagged, unless the cohort shows two
      // classes (the gap between them is the evidence).
      return (sigma_ > 0 || split_) && w.level_total > typical_ + options_.threshold * sigma_ &&
             w.slowdown >= mad_floor;
    case api::DetectionRule::kRelativeScore:
      return fastest_ / w.level_total < options_.threshold ||
             (options_.individual_score && w.best_total / w.level_total < options_.threshold);
    case api::DetectionRule::kStar:
      return fastest_ > 0 && (w.level_total - fastest_) / fastest_ > options_.threshold;
    case api::DetectionRule::kChangePoint:
      return typical_mean_ > 0 && w.mean_total / typical_mean_ - 1 > options_.threshold;
  }
  return false;
}

bool Detector::MadRecovered(const Worker& w) const {
  const double floor = RecoveryFloor(w);
  const double bound =
      std::max(typical_ + options_.recovery_threshold * sigma_, typical_ * floor);
  // A wide spread must not put the recovery bound near the onset's: the worker returns
  // at least to the middle of its hysteresis band.
  return w.level_total <= std::min(bound, typical_ * std::sqrt(floor * OnsetFloor(w)));
}

bool Detector::RecoveryCondition(const Worker& w) const {
  if (w.level_total <= 0) return true;
  const double rt = options_.recovery_threshold;
  switch (options_.rule) {
    case api::DetectionRule::kMad:
      return MadRecovered(w);
    case api::DetectionRule::kRelativeScore:
      return fastest_ / w.level_total >= rt &&
             (!options_.individual_score || w.best_total / w.level_total >= rt);
    case api::DetectionRule::kStar:
      return fastest_ <= 0 || (w.level_total - fastest_) / fastest_ <= rt;
    case api::DetectionRule::kChangePoint:
      return typical_mean_ <= 0 || w.mean_total / typical_mean_ - 1 <= rt;
  }
  return true;
}

bool Detector::PersistedLongEnough(const Worker& w, int streak, int needed) const {
  if (streak < needed) return false;
  return options_.rule != api::DetectionRule::kChangePoint ||
         w.last_iteration - w.streak_start_iteration >= options_.change_point_min_iterations;
}

void Detector::Excess(const Worker& w, double* compute, double* comm) const {
  // The reference is the typical worker, or with the individual score the worker's own
  // best window when it deviates more from that.
  if (options_.individual_score && w.level_total - w.best_total > w.level_total - typical_) {
    *compute = w.level_compute - w.best_compute;
    *comm = w.level_comm - w.best_comm;
  } else {
    *compute = w.level_compute - typical_compute_;
    *comm = w.level_comm - typical_comm_;
  }
}

api::StragglerCause Detector::DominantCause(const Worker& w) const {
  double compute = 0, comm = 0;
  Excess(w, &compute, &comm);
  return CauseOf(compute, comm);
}

Event Detector::StragglerEvent(int id, const Worker& w) const {
  return Event{w.last_iteration, id, State::kStraggler, w.cause, w.kind, w.slowdown};
}

void Detector::Evaluate(std::vector<Event>* events) {
  pending_ = 0;
  const bool window_cohort = WindowCohort();
  StepCohort(/*owns_split=*/!window_cohort);
  for (size_t id = 0; id < static_cast<size_t>(num_workers_); ++id) {
    const Worker& w = workers_[id];
    if (!w.known) continue;
    const int i = static_cast<int>(id);
    if (w.straggler ? StepUpdate(i, events) : StepOnset(i, events)) continue;
    if (window_cohort && in_window_[id]) JudgeWindow(i, events);
  }
}

bool Detector::WindowCohort() {
  ready_.clear();
  const int needed = ShortLevel() ? options_.onset_window + 1 : options_.window;
  for (size_t id = 0; id < static_cast<size_t>(num_workers_); ++id) {
    Worker& w = workers_[id];
    in_window_[id] = w.known && w.count >= needed;
    if (!in_window_[id]) continue;
    if (w.dirty) UpdateWorkerStats(static_cast<int>(id));
    ready_.push_back(static_cast<int>(id));
  }
  if (ready_.size() < 2) return false;
  SplitWindowCohort();
  const Cohort cohort = CohortOf(workers_, reference_, options_.rule, scratch_a_, scratch_b_,
                                 scratch_c_, scratch_d_);
  fastest_ = kInf;
  for (int id : ready_) fastest_ = std::min(fastest_, workers_[static_cast<size_t>(id)].med_total);
  typical_ = cohort.typical;
  typical_compute_ = cohort.typical_compute;
  typical_comm_ = cohort.typical_comm;
  if (cohort.sigma) sigma_ = *cohort.sigma;
  if (cohort.typical_mean) typical_mean_ = *cohort.typical_mean;
  return true;
}

void Detector::SplitWindowCohort() {
  const size_t n = ready_.size();
  for (size_t i = 0; i < n; ++i) scratch_d_[i] = workers_[static_cast<size_t>(ready_[i])].med_total;
  std::sort(scratch_d_.begin(), scratch_d_.begin() + static_cast<std::ptrdiff_t>(n));
  const size_t slow = SlowClassStart(scratch_d_.data(), n, options_.class_gap > 0 ? ClassExit() : 0,
                                     split_ ? ClassExit() : options_.class_gap, kMinClass);
  const double cut = slow > 0 ? scratch_d_[slow] : kInf;
  reference_.clear();
  for (int id : ready_) {
    if (workers_[static_cast<size_t>(id)].med_total < cut) reference_.push_back(id);
  }
  const bool split = slow > 0;
  // Baselines are slowdowns against the reference: re-express them when it changes.
  const double scale = split ? SortedMedian(scratch_d_.data(), n) / SortedMedian(scratch_d_.data(), slow)
                             : 1;
  if (split && !split_) RescaleBaselines(scale);
  if (!split && split_) RescaleBaselines(1 / class_scale_);
  if (split) class_scale_ = scale;
  split_ = split;
}

double Detector::ClassExit() const { return 1 + (options_.class_gap - 1) / 2; }

void Detector::RescaleBaselines(double factor) {
  for (Worker& w : workers_) w.baseline *= factor;
}

void Detector::StepCohort(bool owns_split) {
  typical_step_ = typical_step_compute_ = typical_step_comm_ = 0;
  if (options_.step_slowdown == 0) return;
  size_t n = 0;
  for (size_t id = 0; id < static_cast<size_t>(num_workers_); ++id) {
    Worker& w = workers_[id];
    if (!w.known || w.count < options_.step_samples) continue;
    UpdateStepLevel(static_cast<int>(id));
    scratch_d_[n++] = w.step_total;
  }
  if (n < 3) return;
  // The typical step level is the faster class's when the step levels show two.
  std::sort(scratch_d_.begin(), scratch_d_.begin() + static_cast<std::ptrdiff_t>(n));
  const size_t slow = SlowClassStart(scratch_d_.data(), n, options_.class_gap > 0 ? ClassExit() : 0,
                                     split_ ? ClassExit() : options_.class_gap, kMinClass);
  if (owns_split) split_ = slow > 0;
  const double cut = slow > 0 ? scratch_d_[slow] : kInf;
  size_t m = 0;
  for (size_t id = 0; id < static_cast<size_t>(num_workers_); ++id) {
    const Worker& w = workers_[id];
    if (!w.known || w.count < options_.step_samples || w.step_total >= cut) continue;
    scratch_a_[m] = w.step_total;
    scratch_b_[m] = w.step_compute;
    scratch_c_[m] = w.step_comm;
    ++m;
  }
  typical_step_ = MedianInPlace(scratch_a_.data(), m);
  typical_step_compute_ = MedianInPlace(scratch_b_.data(), m);
  typical_step_comm_ = MedianInPlace(scratch_c_.data(), m);
}

size_t Detector::Newest(const Worker& w, int id, size_t i) const {
  const auto window = static_cast<size_t>(options_.window);
  return static_cast<size_t>(id) * window + (static_cast<size_t>(w.head) + window - 1 - i) % window;
}

void Detector::UpdateStepLevel(int id) {
  Worker& w = workers_[static_cast<size_t>(id)];
  w.step_total = kInf;
  for (size_t i = 0; i < static_cast<size_t>(options_.step_samples); ++i) {
    const size_t slot = Newest(w, id, i);
    if (total_[slot] < w.step_total) {
      w.step_total = total_[slot];
      w.step_compute = compute_[slot];
      w.step_comm = comm_[slot];
    }
  }
}

double Detector::PriorMedian(int id, const std::vector<double>& ring) {
  const Worker& w = workers_[static_cast<size_t>(id)];
  const auto m = static_cast<size_t>(options_.step_samples);
  const auto n = static_cast<size_t>(w.count);
  if (n <= m) return 0;
  for (size_t i = m; i < n; ++i) scratch_window_[i - m] = ring[Newest(w, id, i)];
  return MedianInPlace(scratch_window_.data(), n - m);
}

bool Detector::StepOnset(int id, std::vector<Event>* events) {
  Worker& w = workers_[static_cast<size_t>(id)];
  if (typical_step_ <= 0 || w.count < options_.step_samples ||
      w.step_total < options_.step_slowdown * typical_step_) {
    return false;
  }
  // A step is a change: the worker must have risen over its own earlier samples (by
  // three quarters of the step's excess: a step level is the smaller of its samples), so
  // noise on a worker that was always slow is not one. A worker slow from its first
  // samples shows no step: the window judges it (static).
  const double prior = PriorMedian(id, total_);
  if (prior <= 0 || w.step_total < (1 + 0.75 * (options_.step_slowdown - 1)) * prior) return false;
  MarkStraggler(w, CauseOf(w.step_compute - typical_step_compute_, w.step_comm - typical_step_comm_),
                api::StragglerKind::kDynamic);
  w.slowdown = w.step_total / typical_step_;
  EmitStraggler(id, events);
  return true;
}

bool Detector::StepUpdate(int id, std::vector<Event>* events) {
  Worker& w = workers_[static_cast<size_t>(id)];
  if (typical_step_ <= 0 || YoungEpisode(w) || w.count < options_.step_samples ||
      w.step_total < options_.step_slowdown * std::max(w.slowdown, 1.0) * typical_step_) {
    return false;
  }
  // A straggler slowed further: an update with the step's slowdown and the cause of the
  // step (what rose over the worker's own earlier samples). Its kind stays.
  w.cause = CauseOf(w.step_compute - PriorMedian(id, compute_),
                    w.step_comm - PriorMedian(id, comm_));
  w.slowdown = w.step_total / typical_step_;
  w.event_samples = w.samples;
  w.recovery_streak = w.cause_streak = 0;
  EmitStraggler(id, events);
  return true;
}

bool Detector::YoungEpisode(const Worker& w) const {
  return w.straggler && w.samples - w.event_samples < options_.window / 2;
}

void Detector::JudgeWindow(int id, std::vector<Event>* events) {
  Worker& w = workers_[static_cast<size_t>(id)];
  w.slowdown = typical_ > 0 ? w.level_total / typical_ : 1;
  if (w.straggler) {
    JudgeStraggler(id, events);
    return;
  }
  if (!OnsetCondition(w, OnsetFloor(w))) {
    w.onset_streak = 0;
    // At the cohort's level (not even over the static floor): the worker's baseline.
    if (!OnsetCondition(w, options_.static_slowdown)) {
      w.baseline = w.baseline > 0 ? std::min(w.baseline, w.slowdown) : w.slowdown;
    }
    return;
  }
  ExtendOnsetStreak(w);
  if (!PersistedLongEnough(w, w.onset_streak, options_.onset_evaluations)) return;
  // Never seen at a normal level: slow since it was first judged, so static.
  MarkStraggler(w, DominantCause(w),
                w.baseline > 0 ? api::StragglerKind::kDynamic : api::StragglerKind::kStatic);
  EmitStraggler(id, events);
}

void Detector::JudgeStraggler(int id, std::vector<Event>* events) {
  Worker& w = workers_[static_cast<size_t>(id)];
  // Recovery is judged once half a window of samples followed the onset, so the window
  // reflects the episode (a step-path onset comes before the window has seen it).
  if (!YoungEpisode(w) && RecoveryCondition(w)) {
    if (w.recovery_streak++ == 0) w.streak_start_iteration = w.last_iteration;
    if (PersistedLongEnough(w, w.recovery_streak, options_.recovery_evaluations)) {
      MarkRecovered(w);
      events->push_back(Event{w.last_iteration, id, State::kRecovered, w.cause, w.kind,
                              w.slowdown});
    }
    return;
  }
  w.recovery_streak = 0;
  if (WindowRise(id, events)) return;
  // Reclassify cause and kind only while the worker is clearly slow (not in the
  // hysteresis band between the recovery and onset thresholds).
  if (!OnsetCondition(w, OnsetFloor(w))) {
    w.cause_streak = 0;
    return;
  }
  double compute = 0, comm = 0;
  Excess(w, &compute, &comm);
  if (Reclassify(w, compute, comm, options_)) EmitStraggler(id, events);
}

bool Detector::WindowRise(int id, std::vector<Event>* events) {
  Worker& w = workers_[static_cast<size_t>(id)];
  // Judged once a whole window followed the last event (the window then holds only the
  // level reported, or what came after it); the reference is that settled level, or a
  // clearly lower one the worker dropped to since.
  if (w.samples - w.update_samples < options_.window) return false;
  if (!w.settled || w.slowdown * options_.min_slowdown <= w.reference_slowdown) {
    w.settled = true;
    w.reference_slowdown = w.slowdown;
  }
  if (w.slowdown < options_.min_slowdown * w.reference_slowdown) {
    w.rise_streak = 0;
    return false;
  }
  if (++w.rise_streak < options_.onset_evaluations) return false;
  EmitStraggler(id, events);
  return true;
}

void Detector::EmitStraggler(int id, std::vector<Event>* events) {
  Worker& w = workers_[static_cast<size_t>(id)];
  w.update_samples = w.samples;
  w.settled = false;
  w.rise_streak = 0;
  events->push_back(StragglerEvent(id, w));
}

bool Detector::Flag(int worker, api::StragglerCause cause, double slowdown,
                    std::vector<Event>* events) {
  if (worker < 0 || worker >= num_workers_ || !std::isfinite(slowdown) || slowdown <= 0) {
    return false;
  }
  Worker& w = workers_[static_cast<size_t>(worker)];
  if (!w.known || w.straggler) return false;
  MarkStraggler(w, cause, api::StragglerKind::kDynamic);
  w.slowdown = slowdown;
  EmitStraggler(worker, events);
  return true;
}

bool Detector::IsStraggler(int worker) const {
  return worker >= 0 && static_cast<size_t>(worker) < workers_.size() &&
         workers_[static_cast<size_t>(worker)].straggler;
}

WorkerView Detector::View(int worker) const {
  WorkerView v;
  if (worker < 0 || static_cast<size_t>(worker) >= workers_.size()) return v;
  const Worker& w = workers_[static_cast<size_t>(worker)];
  if (!w.known) return v;
  v.known = true;
  v.ready = w.count >= options_.window;
  v.straggler = w.straggler;
  v.cause = w.cause;
  v.kind = w.kind;
  v.slowdown = w.slowdown;
  v.since_iteration = w.since;
  v.last_iteration = w.last_iteration;
  v.median_seconds = w.med_total;
  v.level_seconds = YoungEpisode(w) && w.step_total > 0 ? w.step_total : w.med_total;
  return v;
}

std::vector<int> Detector::Stragglers() const {
  std::vector<int> out;
  for (size_t id = 0; id < static_cast<size_t>(num_workers_); ++id) {
    if (workers_[id].straggler) out.push_back(static_cast<int>(id));
  }
  return out;
}

}  // namespace star::detect
