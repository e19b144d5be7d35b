#include "star/core/detect/detector.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

namespace star::detect {
namespace {

constexpr int kMinWindow = 3;
constexpr int kMaxWindow = 1024;
constexpr int kMaxEvaluations = 1000;
// Korel's consistency constant: 1.4826 * MAD estimates the standard deviation.
constexpr double kMadToSigma = 1.4826;

std::string Num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

Status Bad(std::string_view field, const std::string& reason) {
  return Status::InvalidArgument(std::string(field) + ": " + reason);
}

double DefaultThreshold(api::DetectionRule rule) {
  switch (rule) {
    case api::DetectionRule::kMad: return 3.0;
    case api::DetectionRule::kRelativeScore: return 0.75;
    case api::DetectionRule::kStar: return 0.2;
    case api::DetectionRule::kChangePoint: return 0.2;
  }
  return 0;
}

double DefaultRecoveryThreshold(api::DetectionRule rule) {
  switch (rule) {
    case api::DetectionRule::kMad: return 2.0;
    case api::DetectionRule::kRelativeScore: return 0.85;
    case api::DetectionRule::kStar: return 0.1;
    case api::DetectionRule::kChangePoint: return 0.1;
  }
  return 0;
}

bool UseDefault(double v) { return std::isnan(v) || v == 0; }

// Median of data[0, n); reorders data. n >= 1.
double MedianInPlace(double* data, size_t n) {
  const size_t mid = n / 2;
  if (n <= 32) {  // small windows: insertion sort beats selection
    for (size_t i = 1; i < n; ++i) {
      const double v = data[i];
      size_t j = i;
      for (; j > 0 && data[j - 1] > v; --j) data[j] = data[j - 1];
      data[j] = v;
    }
    return n % 2 == 1 ? data[mid] : 0.5 * (data[mid - 1] + data[mid]);
  }
  std::nth_element(data, data + mid, data + n);
  const double upper = data[mid];
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(data, data + mid);
  return 0.5 * (lower + upper);
}

double Round4(double v) { return std::round(v * 1e4) / 1e4; }

// Statistics of one round's cohort (the workers with a full window).
struct Cohort {
  double fastest = 0, typical = 0, typical_compute = 0, typical_comm = 0;
  std::optional<double> sigma;         // rule mad only
  std::optional<double> typical_mean;  // rule change_point only
};

// The cohort of workers[id] for the ids in `ready` (not empty), through the scratch
// buffers (each at least ready.size() long). Templated over the detector's private
// worker record.
template <typename Worker>
Cohort CohortOf(const std::vector<Worker>& workers, const std::vector<int>& ready,
                api::DetectionRule rule, std::vector<double>& scratch_a,
                std::vector<double>& scratch_b, std::vector<double>& scratch_c,
                std::vector<double>& scratch_d) {
  const size_t n = ready.size();
  Cohort c;
  double fastest = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) {
    const Worker& w = workers[static_cast<size_t>(ready[i])];
    scratch_a[i] = w.med_total;
    scratch_b[i] = w.med_compute;
    scratch_c[i] = w.med_comm;
    fastest = std::min(fastest, w.med_total);
  }
  c.fastest = fastest;
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
void ExtendOnsetStreak(Worker& w, int64_t evaluation) {
  if (w.onset_streak++ == 0) {
    w.streak_start_iteration = w.last_iteration;
    w.streak_start_evaluation = evaluation;
  }
}

// Onset confirmed: `w` becomes a straggler of `cause`, static when its streak started
// within the first `onset_evaluations` evaluations.
template <typename Worker>
void MarkStraggler(Worker& w, api::StragglerCause cause, int onset_evaluations) {
  w.straggler = true;
  w.since = w.last_iteration;
  w.onset_samples = w.samples;
  w.cause = cause;
  w.kind = w.streak_start_evaluation < onset_evaluations ? api::StragglerKind::kStatic
                                                         : api::StragglerKind::kDynamic;
  w.onset_streak = w.recovery_streak = w.cause_streak = 0;
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

std::string_view RuleName(api::DetectionRule rule) {
  switch (rule) {
    case api::DetectionRule::kMad: return "mad";
    case api::DetectionRule::kRelativeScore: return "relative";
    case api::DetectionRule::kStar: return "star";
    case api::DetectionRule::kChangePoint: return "change_point";
  }
  return "unknown";
}

std::optional<api::DetectionRule> ParseRule(std::string_view s) {
  using R = api::DetectionRule;
  for (R r : {R::kMad, R::kRelativeScore, R::kStar, R::kChangePoint}) {
    if (RuleName(r) == s) return r;
  }
  return std::nullopt;
}

std::string_view ToString(State state) {
  switch (state) {
    case State::kStraggler: return "straggler";
    case State::kRecovered: return "recovered";
  }
  return "unknown";
}

DetectorOptions ResolveDefaults(DetectorOptions options) {
  if (UseDefault(options.threshold)) options.threshold = DefaultThreshold(options.rule);
  if (UseDefault(options.recovery_threshold)) {
    options.recovery_threshold = DefaultRecoveryThreshold(options.rule);
  }
  return options;
}

Status Validate(const DetectorOptions& options) {
  const api::DetectionRule rule = options.rule;
  if (RuleName(rule) == "unknown") {
    return Bad("rule", "unknown rule " + std::to_string(static_cast<int>(rule)));
  }
  if (options.window < kMinWindow || options.window > kMaxWindow) {
    return Bad("window", "must be in [" + std::to_string(kMinWindow) + ", " +
                             std::to_string(kMaxWindow) + "], got " +
                             std::to_string(options.window));
  }
  const std::string rule_name(RuleName(rule));
  for (const auto& [field, value] : {std::pair<std::string_view, double>{"threshold", options.threshold},
                                     {"recovery_threshold", options.recovery_threshold}}) {
    if (std::isnan(value)) continue;
    if (!std::isfinite(value) || value < 0) {
      return Bad(field, "must be a finite number >= 0 (0 or NaN = rule default), got " + Num(value));
    }
  }
  const DetectorOptions r = ResolveDefaults(options);
  if (rule == api::DetectionRule::kRelativeScore) {
    if (r.threshold >= 1) {
      return Bad("threshold", "must be in (0, 1) for rule relative, got " + Num(r.threshold));
    }
    if (r.recovery_threshold > 1) {
      return Bad("recovery_threshold",
                 "must be in (0, 1] for rule relative, got " + Num(r.recovery_threshold));
    }
    if (r.recovery_threshold < r.threshold) {
      return Bad("recovery_threshold", "must be >= threshold (" + Num(r.threshold) +
                                           ") for rule relative, got " +
                                           Num(r.recovery_threshold));
    }
  } else if (r.recovery_threshold > r.threshold) {
    return Bad("recovery_threshold", "must be <= threshold (" + Num(r.threshold) +
                                         ") for rule " + rule_name + ", got " +
                                         Num(r.recovery_threshold));
  }
  if (!std::isfinite(options.min_slowdown) || options.min_slowdown < 1) {
    return Bad("min_slowdown", "must be a finite number >= 1, got " + Num(options.min_slowdown));
  }
  if (!std::isfinite(options.recovery_slowdown) || options.recovery_slowdown < 1 ||
      options.recovery_slowdown > options.min_slowdown) {
    return Bad("recovery_slowdown", "must be in [1, min_slowdown (" +
                                        Num(options.min_slowdown) + ")], got " +
                                        Num(options.recovery_slowdown));
  }
  if (options.change_point_min_iterations < 0) {
    return Bad("change_point_min_iterations",
               "must be >= 0, got " + std::to_string(options.change_point_min_iterations));
  }
  for (const auto& [field, value] :
       {std::pair<std::string_view, int>{"onset_evaluations", options.onset_evaluations},
        {"recovery_evaluations", options.recovery_evaluations}}) {
    if (value < 1 || value > kMaxEvaluations) {
      return Bad(field, "must be in [1, " + std::to_string(kMaxEvaluations) + "], got " +
                            std::to_string(value));
    }
  }
  if (options.onset_window < 0) {
    return Bad("onset_window", "must be >= 0 (0 = the full window), got " +
                                   std::to_string(options.onset_window));
  }
  if (!std::isfinite(options.step_slowdown) ||
      (options.step_slowdown != 0 && options.step_slowdown <= 1)) {
    return Bad("step_slowdown", "must be 0 (off) or a finite number > 1, got " +
                                    Num(options.step_slowdown));
  }
  if (options.step_samples < 1 || options.step_samples > options.window) {
    return Bad("step_samples", "must be in [1, window (" + std::to_string(options.window) +
                                   ")], got " + std::to_string(options.step_samples));
  }
  if (options.static_after_iterations < 1) {
    return Bad("static_after_iterations",
               "must be >= 1, got " + std::to_string(options.static_after_iterations));
  }
  if (!std::isfinite(options.cause_switch_ratio) || options.cause_switch_ratio < 1) {
    return Bad("cause_switch_ratio",
               "must be a finite number >= 1, got " + Num(options.cause_switch_ratio));
  }
  return Status::Ok();
}

nlohmann::json ToJson(const Event& event) { return nlohmann::json::parse(ToJsonLine(event)); }

std::string ToJsonLine(const Event& event) {
  nlohmann::ordered_json j;  // keeps the contract's key order
  j["iteration"] = event.iteration;
  j["worker"] = event.worker;
  j["state"] = ToString(event.state);
  if (event.state == State::kStraggler) {
    j["cause"] = api::ToString(event.cause);
    j["kind"] = api::ToString(event.kind);
    j["slowdown"] = Round4(event.slowdown);
  }
  return j.dump();
}

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
  // The newest m samples: ring positions head - 1, head - 2, ... (mod window).
  const auto window = static_cast<size_t>(options_.window);
  // Only mad and relative look at the newest samples: star's narrow hysteresis band
  // (0.2 / 0.1 over the fastest) needs the full window's median not to flap, and
  // change_point compares means.
  const size_t m = ShortLevel() ? std::min(n, static_cast<size_t>(options_.onset_window)) : n;
  auto newest_median = [&](const std::vector<double>& ring) {
    for (size_t i = 0; i < m; ++i) {
      scratch[i] = ring[base + (static_cast<size_t>(w.head) + window - 1 - i) % window];
    }
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

bool Detector::OnsetCondition(const Worker& w) const {
  if (w.level_total <= 0) return false;
  switch (options_.rule) {
    case api::DetectionRule::kMad:
      // sigma_ == 0: no spread estimate, nobody is flagged.
      return sigma_ > 0 && w.level_total > typical_ + options_.threshold * sigma_ &&
             w.slowdown >= options_.min_slowdown;
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

bool Detector::RecoveryCondition(const Worker& w) const {
  if (w.level_total <= 0) return true;
  const double rt = options_.recovery_threshold;
  switch (options_.rule) {
    case api::DetectionRule::kMad:
      return w.level_total <= std::max(typical_ + rt * sigma_, typical_ * options_.recovery_slowdown);
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
  return comm > compute ? api::StragglerCause::kCommunication : api::StragglerCause::kCompute;
}

Event Detector::StragglerEvent(int id, const Worker& w) const {
  return Event{w.last_iteration, id, State::kStraggler, w.cause, w.kind, w.slowdown};
}

void Detector::Evaluate(std::vector<Event>* events) {
  pending_ = 0;
  const bool window_cohort = WindowCohort();
  StepCohort();
  for (size_t id = 0; id < static_cast<size_t>(num_workers_); ++id) {
    Worker& w = workers_[id];
    if (!w.known) continue;
    if (!w.straggler && StepOnset(w)) {
      double compute = w.step_compute - typical_step_compute_;
      double comm = w.step_comm - typical_step_comm_;
      MarkStraggler(w, comm > compute ? api::StragglerCause::kCommunication
                                      : api::StragglerCause::kCompute, 1);
      w.kind = w.step_rounds == 1 ? api::StragglerKind::kStatic : api::StragglerKind::kDynamic;
      w.slowdown = w.step_total / typical_step_;
      events->push_back(StragglerEvent(static_cast<int>(id), w));
      continue;
    }
    if (window_cohort && in_window_[id]) JudgeWindow(static_cast<int>(id), events);
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
  const Cohort cohort =
      CohortOf(workers_, ready_, options_.rule, scratch_a_, scratch_b_, scratch_c_, scratch_d_);
  fastest_ = cohort.fastest;
  typical_ = cohort.typical;
  typical_compute_ = cohort.typical_compute;
  typical_comm_ = cohort.typical_comm;
  if (cohort.sigma) sigma_ = *cohort.sigma;
  if (cohort.typical_mean) typical_mean_ = *cohort.typical_mean;
  return true;
}

void Detector::StepCohort() {
  typical_step_ = typical_step_compute_ = typical_step_comm_ = 0;
  if (options_.step_slowdown == 0) return;
  size_t n = 0;
  for (size_t id = 0; id < static_cast<size_t>(num_workers_); ++id) {
    Worker& w = workers_[id];
    if (!w.known || w.count < options_.step_samples) continue;
    UpdateStepLevel(static_cast<int>(id));
    ++w.step_rounds;
    scratch_a_[n] = w.step_total;
    scratch_b_[n] = w.step_compute;
    scratch_c_[n] = w.step_comm;
    ++n;
  }
  if (n < 3) return;
  typical_step_ = MedianInPlace(scratch_a_.data(), n);
  typical_step_compute_ = MedianInPlace(scratch_b_.data(), n);
  typical_step_comm_ = MedianInPlace(scratch_c_.data(), n);
}

void Detector::UpdateStepLevel(int id) {
  Worker& w = workers_[static_cast<size_t>(id)];
  const auto window = static_cast<size_t>(options_.window);
  const size_t base = static_cast<size_t>(id) * window;
  w.step_total = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < static_cast<size_t>(options_.step_samples); ++i) {
    const size_t slot = base + (static_cast<size_t>(w.head) + window - 1 - i) % window;
    if (total_[slot] < w.step_total) {
      w.step_total = total_[slot];
      w.step_compute = compute_[slot];
      w.step_comm = comm_[slot];
    }
  }
}

bool Detector::StepOnset(const Worker& w) const {
  return typical_step_ > 0 && w.count >= options_.step_samples &&
         w.step_total >= options_.step_slowdown * typical_step_;
}

bool Detector::YoungEpisode(const Worker& w) const {
  return w.straggler && w.samples - w.onset_samples < options_.window / 2;
}

void Detector::JudgeWindow(int id, std::vector<Event>* events) {
  Worker& w = workers_[static_cast<size_t>(id)];
  w.slowdown = typical_ > 0 ? w.level_total / typical_ : 1;
  const int64_t evaluation = w.evaluations++;
  if (!w.straggler) {
    if (!OnsetCondition(w)) {
      w.onset_streak = 0;
      return;
    }
    ExtendOnsetStreak(w, evaluation);
    if (!PersistedLongEnough(w, w.onset_streak, options_.onset_evaluations)) return;
    MarkStraggler(w, DominantCause(w), options_.onset_evaluations);
    events->push_back(StragglerEvent(id, w));
    return;
  }
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
  // Reclassify cause and kind only while the worker is clearly slow (not in the
  // hysteresis band between the recovery and onset thresholds).
  if (!OnsetCondition(w)) {
    w.cause_streak = 0;
    return;
  }
  double compute = 0, comm = 0;
  Excess(w, &compute, &comm);
  if (Reclassify(w, compute, comm, options_)) events->push_back(StragglerEvent(id, w));
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
