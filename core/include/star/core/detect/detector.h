// Streaming straggler detector (ALGORITHMS.md section 1).
//
// The detector consumes per-iteration timings of every worker, one observation at a time,
// and reports state changes: a worker becoming a straggler (with its cause, static or
// dynamic kind, and slowdown) and a worker recovering. It is pure: no clock, no I/O, no
// threads; the iteration numbers in the samples are its only notion of time.
//
// How it decides
// --------------
// * Statistic. Every worker keeps a ring buffer of its last `window` samples. Its
//   statistic is the windowed MEDIAN of t_i = compute + communication (waiting on peers
//   is excluded); the change-point rule uses the windowed MEAN. A worker takes part in
//   detection (as a candidate and as a member of the cohort) once its window is full.
// * Evaluation rounds. Cross-worker statistics (the typical worker = median of the
//   worker medians, MAD, fastest median) are recomputed once per round, not per sample.
//   A round closes as soon as every known worker has reported the newest iteration (and
//   at least as many samples as there are known workers arrived since the previous
//   round), or otherwise (workers reporting different iterations) when a sample arrives
//   whose iteration is larger than every iteration seen so far AND that many samples
//   arrived; the closing sample then belongs to the next round. Each round costs
//   O(n * window) and needs n new samples, so Observe is amortised O(window) = O(1) per
//   sample with no allocation (memory grows only when a new worker id appears). Call
//   Flush() after the last sample (end of a trace) to evaluate the final round.
//   Samples should arrive roughly in iteration order across workers, as they do from a
//   live job or a trace sorted by iteration.
// * Two speed classes. The cohort's typical worker is the median worker of its faster
//   class when the workers' levels show two (class_gap: a step between neighbours and
//   class medians 1.4x apart), else of all of them; the MAD's spread and the step
//   path's typical level come from the same class. So with half of the workers 3x
//   slower the slow half are stragglers (static), not half of the statistics.
// * Persistence and hysteresis. A worker becomes a straggler only after its onset
//   condition held in `onset_evaluations` consecutive rounds; it recovers only after
//   its (stricter, lower) recovery condition held in `recovery_evaluations` consecutive
//   rounds, judged from half a window of its samples after the onset (so its window
//   reflects the episode). Between the two thresholds the state is kept. So noise does
//   not flap.
// * Baseline (rule mad). A worker's baseline is the lowest slowdown it showed in a
//   round at a normal level (not straggling, under static_slowdown). Without one (slow
//   since its first window) it is flagged only from static_slowdown (1.45), as static;
//   with one, from min_slowdown times max(1, baseline), as dynamic, and it recovers at
//   recovery_slowdown times max(1, baseline), never above the middle of that band. So
//   ordinary heterogeneity (a worker 1.3x slower for the whole run) is not a straggler,
//   and an episode of such a worker is judged against its own level.
// * Step path. A large step (step_slowdown, default 1.6x the cohort's typical short
//   level, in each of the worker's newest step_samples = 2 samples, and a rise of
//   three quarters of that over the worker's own earlier samples) is flagged at once,
//   by any rule; see DetectorOptions::step_slowdown. Its slowdown is the step ratio,
//   its cause the excess of the components of the worker's step sample, its kind
//   dynamic. A straggler whose step level rises step_slowdown times over its slowdown
//   gets an update event (the new slowdown and the step's cause) within the same two
//   samples; a smaller rise, min_slowdown times over the level the straggler settled
//   at (its slowdown a window after its last event, or lower since) for
//   onset_evaluations rounds, is an update from the window path.
// * Outside evidence. Flag() marks a worker a straggler at once on evidence its
//   timings cannot show yet (the control loop: a link into or out of it several times
//   the typical link, which in a ring every member waits on alike); from then on it is
//   judged like a step-path straggler.
// * Rules (`threshold` / `recovery_threshold` meaning; NaN or 0 selects the default):
//   - kMad (default, Korel): m = typical median, MAD = median_j |med_j - m|,
//     sigma = 1.4826 * MAD. Onset: med_i > m + k * sigma with k = threshold (default 3)
//     AND slowdown >= min_slowdown (default 1.2: guards against a tiny MAD among
//     near-identical workers). Recovery: med_i <= max(m + k' * sigma,
//     m * recovery_slowdown) with k' = recovery_threshold (default 2) and
//     recovery_slowdown default 1.1. A MAD of 0 (more than half of the workers have
//     exactly the same windowed time, e.g. a noise-free simulated trace) gives no spread
//     estimate: the MAD rule then flags NOBODY (recovery is still judged by the
//     relative bound), unless the cohort shows two classes (the gap is the evidence).
//     Use kRelativeScore or kStar for noise-free traces. With fewer than 3 workers the
//     MAD rule cannot flag anyone.
//   - kRelativeScore (NVIDIA resiliency-ext): score_i = min_j med_j / med_i in (0, 1].
//     Onset: score_i < threshold (default 0.75). Recovery: score_i >= recovery_threshold
//     (default 0.85). With `individual_score`, a worker is also scored against its own
//     best (lowest) windowed median, best_i / med_i, so a worker getting slower is
//     flagged even when all workers are slow; recovery then needs both scores to pass.
//   - kStar (STAR): onset when (med_i - t_min) / t_min > threshold (default 0.2),
//     t_min = min_j med_j. Recovery when it is <= recovery_threshold (default 0.1).
//     Note: t_min is biased low by noise in large cohorts, so this rule gets more
//     sensitive as the number of workers grows (as published).
//   - kChangePoint (FALCON/Greyhound): the worker's windowed mean relative to the
//     typical worker's windowed mean (median of the worker means) must move by more than
//     threshold (default 0.2, i.e. 20%) and the shift must last more than
//     `change_point_min_iterations` (default 10) iterations of that worker. Recovery: the
//     ratio falls to <= 1 + recovery_threshold (default 0.1) for just as long. Being
//     relative to the cohort, a worker slow from its first window counts as shifted.
// * slowdown = med_i / typical median (the median worker's, of the faster class when
//   there are two), whatever the rule.
// * Cause. The excess of the worker's windowed compute median and communication median
//   over the typical worker's (median over workers of those medians) is compared in
//   seconds: the component that accounts for most of the extra time is the cause.
//   (FALCON's fixed cut-offs, compute > 2x median / link > 1.1x median, would leave a
//   1.5x compute slowdown unattributed; comparing the excesses covers them.)
//   With `individual_score`, when the worker is further above its own best window than
//   above the typical worker, the components of its best window are the reference.
// * Kind (BOA). kStatic if the worker was never judged at a normal level before its
//   onset (slow since its first full window), or once an episode has lasted
//   `static_after_iterations` iterations; kDynamic otherwise.
// * Reclassification. While a worker straggles, a change of its cause (the other
//   component's excess must exceed the current one by `cause_switch_ratio` for
//   `onset_evaluations` consecutive rounds) or of its kind (dynamic -> static when the
//   episode gets long; never static -> dynamic within an episode), judged only while
//   the onset condition holds (not in the hysteresis band), emits a NEW
//   kStraggler event carrying the new classification; `since_iteration` is unchanged.
//   Consumers treat a kStraggler event for an already-straggling worker as an update
//   (these and the step path's updates).
// * Event iteration = the last iteration the worker reported when the round closed.
// * Noise (synthetic 100 ms iterations, lognormal noise of sigma s on each component,
//   8 and 64 workers, 300 seeds x 300 iterations): with the defaults no rule raised an
//   event at s = 7%; at s = 10% kMad, kRelativeScore and kChangePoint stayed silent
//   while kStar did not (its reference, the fastest worker, is biased low by noise);
//   at s = 15% only kChangePoint stayed silent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/training_job.h"
#include "star/core/api/types.h"
#include "star/core/api/worker_report.h"
#include "star/core/status.h"

namespace star::detect {

// The rule is the spec's (spec.mitigation.detection.rule). `Rule` is kept as a
// shorter name for it.
using Rule = api::DetectionRule;
// The `star detect --rule` spellings: "mad", "relative", "star", "change_point" (the
// spec's are api::ToString's).
std::string_view RuleName(api::DetectionRule rule);
// Inverse of RuleName; nullopt for anything else (case-sensitive).
std::optional<api::DetectionRule> ParseRule(std::string_view s);

struct DetectorOptions {
  api::DetectionRule rule = api::DetectionRule::kMad;  // default: MAD with hysteresis
  // Samples per worker in the sliding window (the windowed median). In [3, 1024].
  int window = 10;
  // Onset threshold, rule-specific (see the header comment); NaN or 0 = rule default:
  // kMad k = 3 (in MADs), kRelativeScore 0.75 (score), kStar 0.2 (relative excess over
  // the fastest), kChangePoint 0.2 (relative shift of the mean).
  double threshold = 0;
  // Recovery (hysteresis) threshold, same units; NaN or 0 = rule default: kMad k' = 2,
  // kRelativeScore 0.85, kStar 0.1, kChangePoint 0.1. Must not be stricter than the
  // onset threshold (k' <= k; score >= threshold; excess <= threshold).
  double recovery_threshold = 0;
  // kMad only: onset also needs slowdown >= min_slowdown (default 1.2, >= 1), and a
  // worker at or below typical * recovery_slowdown (default 1.1, in [1, min_slowdown])
  // counts as recovered.
  double min_slowdown = 1.2;
  double recovery_slowdown = 1.1;
  // kMad only: a worker never judged at a normal level (slow since its first window) is
  // a straggler (static) only at this slowdown; below it, it is ordinary heterogeneity
  // and its level becomes its baseline. >= min_slowdown; default 1.45 (clean cohorts
  // with workers up to 1.35x apart flag nobody).
  double static_slowdown = 1.45;
  // Two speed classes: when the sorted levels of the workers show a step of at least
  // 1 + (class_gap - 1) / 2 between neighbours, with at least two workers below it and
  // the median of the workers above it at least class_gap times the median of those
  // below, the faster class is the cohort's reference (its typical worker, spread and
  // step level), so the slower class is a set of stragglers rather than half of the
  // statistics. Once seen, a split lasts while the medians stay 1 + (class_gap - 1) / 2
  // apart. 0 = off, else > 1; default 1.4.
  double class_gap = 1.4;
  // kRelativeScore only: also score each worker against its own best windowed median.
  bool individual_score = false;
  // kChangePoint only: a shift (onset or recovery) must last more than this many
  // iterations of the worker. >= 0; default 10.
  int change_point_min_iterations = 10;
  // Rules mad and relative: when in [1, window), a worker's own level (what the onset
  // and recovery conditions, its slowdown and its cause compare against the cohort) is
  // the median of its newest onset_window samples, so a step in its time shows after
  // about half of them, while the cohort's typical time and spread still come from the
  // full windows; 4 flags a step in about 3 iterations instead of 6-7, and a worker is
  // then evaluated once it has onset_window + 1 samples. Rule star always uses the full
  // window's median (its narrow hysteresis band would flap on fewer samples),
  // change_point the window means. >= 0; default 0: the full window (the control loop's
  // setting: on a loaded machine a short level also flags healthy workers' brief
  // slowdowns, 1.35x for a few reports in a clean run).
  int onset_window = 0;
  // The step path (every rule): a worker whose newest step_samples samples are each at
  // least step_slowdown times the cohort's typical step level is flagged in that round,
  // without waiting for its window or onset_evaluations. A worker's step level is the
  // smallest of its newest step_samples totals; the cohort's typical step level is the
  // median of the step levels of every worker with step_samples samples (at least 3 of
  // them), so a load that slows every worker alike cancels out. The window rule above
  // still flags smaller slowdowns. step_slowdown: 0 = off, else > 1; default 1.6 (a
  // clean run beside a busy loop on a 2-core machine showed healthy workers' short
  // levels at up to 1.37x; 2x compute is 1.8x of a 80/20 compute/communication split).
  // step_samples in [1, window]; default 2 (one sample would flag a single hiccup).
  double step_slowdown = 1.6;
  int step_samples = 2;
  // Consecutive rounds the onset / recovery condition must hold. In [1, 1000]; default 3.
  int onset_evaluations = 3;
  int recovery_evaluations = 3;
  // An episode lasting this many iterations (from its onset event) becomes static.
  // >= 1; default 200.
  int64_t static_after_iterations = 200;
  // A straggler's cause switches only when the other component's excess time exceeds
  // the current cause's by this factor (for onset_evaluations rounds). >= 1; default 1.5.
  double cause_switch_ratio = 1.5;
};

// OK, or InvalidArgument naming the field and the reason, e.g.
// "window: must be in [3, 1024], got 1" or
// "threshold: must be in (0, 1) for rule relative, got 1.5".
[[nodiscard]] Status Validate(const DetectorOptions& options);

// Returns `options` with NaN/0 thresholds replaced by the rule's defaults.
[[nodiscard]] DetectorOptions ResolveDefaults(DetectorOptions options);

// One observation: worker `worker`'s timings of iteration `iteration`, in seconds.
struct Sample {
  int64_t iteration = 0;
  int worker = 0;
  double compute_seconds = 0;
  double communication_seconds = 0;
};

enum class State { kStraggler, kRecovered };
// Wire names: "straggler", "recovered".
std::string_view ToString(State state);

struct Event {
  int64_t iteration = 0;
  int worker = 0;
  State state = State::kStraggler;
  // The next three are meaningful for kStraggler only.
  api::StragglerCause cause = api::StragglerCause::kCompute;
  api::StragglerKind kind = api::StragglerKind::kDynamic;
  double slowdown = 1;  // worker's windowed time / typical worker's windowed time

  friend bool operator==(const Event&, const Event&) = default;
};

// The CLI contract:
//   {"iteration":I,"worker":W,"state":"straggler","cause":"compute|communication",
//    "kind":"dynamic|static","slowdown":X}
//   {"iteration":I,"worker":W,"state":"recovered"}
// slowdown is rounded to 4 decimals. nlohmann::json orders keys alphabetically;
// ToJsonLine writes them in the contract's order.
nlohmann::json ToJson(const Event& event);
// One line (no trailing newline) in the contract's key order.
std::string ToJsonLine(const Event& event);

// What the detector currently believes about one worker.
struct WorkerView {
  bool known = false;           // the worker has reported at least once
  bool ready = false;           // its window is full, so it is evaluated (see onset_window)
  bool straggler = false;
  api::StragglerCause cause = api::StragglerCause::kCompute;  // if straggler
  api::StragglerKind kind = api::StragglerKind::kDynamic;     // if straggler
  double slowdown = 1;          // at the last round it was evaluated in
  int64_t since_iteration = -1; // iteration of the onset event; -1 if not straggling
  int64_t last_iteration = -1;  // last iteration observed
  double median_seconds = 0;    // windowed median of t_i at the last evaluated round
  // The worker's time as the detector judges it now: while a straggler's episode is
  // younger than half a window (its window does not show it yet), its step level;
  // otherwise median_seconds.
  double level_seconds = 0;
};

// Not thread-safe; one detector per job. Copyable.
class Detector {
 public:
  // `options` must be valid (check with Validate first): invalid options assert in
  // debug builds and are replaced by DetectorOptions{} otherwise.
  explicit Detector(DetectorOptions options = {});

  // Feeds one observation and appends the state changes it causes (possibly none,
  // possibly several when it closes a round) to *events (which must not be null).
  // Workers may appear at any time (ids >= 0; storage grows as needed). Iterations
  // must be non-decreasing per worker. Ignored samples: negative worker id, an
  // iteration lower than the worker's previous one, negative or non-finite times.
  // Amortised O(window) time, no allocation except when a new worker id appears.
  void Observe(const Sample& sample, std::vector<Event>* events);
  // Convenience: uses report.iteration, worker, compute_seconds and
  // communication_seconds (a report covering several iterations counts as one sample).
  void Observe(const api::WorkerReport& report, std::vector<Event>* events);

  // Closes the current round now (if it has any new samples), e.g. at the end of a
  // trace, and appends the resulting events.
  void Flush(std::vector<Event>* events);
  // Flags `worker` at once from evidence outside its timings (a link several times the
  // typical one, LinkTable), as a dynamic straggler of `cause` with `slowdown` (> 0),
  // and appends the event. Its recovery is then judged like any straggler's, once half
  // a window of its samples followed. False (nothing changes) for a worker never seen,
  // one already straggling, or a slowdown not finite and > 0.
  bool Flag(int worker, api::StragglerCause cause, double slowdown, std::vector<Event>* events);

  bool IsStraggler(int worker) const;
  // The current view of `worker`; known = false for ids never seen.
  WorkerView View(int worker) const;
  // Ids of the workers currently straggling, ascending.
  std::vector<int> Stragglers() const;
  // 1 + the largest worker id seen.
  int num_workers() const { return num_workers_; }
  // The resolved options in use.
  const DetectorOptions& options() const { return options_; }

 private:
  struct Worker {
    bool known = false;
    int count = 0;  // samples in the ring, <= window
    int head = 0;   // next write position
    bool dirty = false;
    int64_t last_iteration = -1;
    double med_total = 0, med_compute = 0, med_comm = 0, mean_total = 0;
    // The worker's level: medians of its newest onset_window samples, or its window's.
    double level_total = 0, level_compute = 0, level_comm = 0;
    double slowdown = 1;
    // Individual score baseline (own best windowed median and its components).
    double best_total = 0, best_compute = 0, best_comm = 0;
    // Detection state.
    bool straggler = false;
    api::StragglerCause cause = api::StragglerCause::kCompute;
    api::StragglerKind kind = api::StragglerKind::kDynamic;
    int64_t since = -1;
    int onset_streak = 0, recovery_streak = 0, cause_streak = 0;
    int64_t streak_start_iteration = 0;
    int64_t samples = 0;        // samples observed, ever
    int64_t event_samples = 0;  // `samples` at the onset or the last step update
    int64_t update_samples = 0;  // `samples` at the straggler's last event of any kind
    // A straggler's settled level (its slowdown a window after its last event, or lower
    // since), the rounds its slowdown has been min_slowdown times over it, and whether
    // it is set.
    double reference_slowdown = 0;
    int rise_streak = 0;
    bool settled = false;
    // The lowest slowdown the worker showed in a round it was at a normal level (not a
    // straggler, under static_slowdown); 0 until it has been at one.
    double baseline = 0;
    // Step path: the worker's step level (its smallest of the newest step_samples
    // totals) and that sample's components.
    double step_total = 0, step_compute = 0, step_comm = 0;
  };

  void Evaluate(std::vector<Event>* events);
  // The window rule's cohort statistics over reference_; false when fewer than 2 are
  // ready.
  bool WindowCohort();
  // reference_: the ready workers of the faster class when their levels show two (see
  // class_gap), else all of them.
  void SplitWindowCohort();
  void RescaleBaselines(double factor);
  // The step levels of the workers with step_samples samples and their typical level
  // (typical_step_*, the faster class's when there are two; 0 when fewer than 3 have
  // them). `owns_split`: no window cohort this round, so the step levels set split_.
  void StepCohort(bool owns_split);
  // Half the class gap's width: the step between neighbours a split needs, and the ratio
  // of the classes' medians that keeps a split once seen.
  double ClassExit() const;
  // Step path for a worker that is not a straggler: flags it (and returns true) when its
  // step level is at least step_slowdown times the typical one and it rose over its own
  // earlier samples.
  bool StepOnset(int id, std::vector<Event>* events);
  // Step path for a straggler: a further step of step_slowdown over its current
  // slowdown is an update event (returns true).
  bool StepUpdate(int id, std::vector<Event>* events);
  // Whether `w` straggles in an episode (or after a step update) younger than half a
  // window (its window does not show it yet: no recovery is judged, and its level is
  // its step level).
  bool YoungEpisode(const Worker& w) const;
  // The window rule's judgement of `id` (in ready_) for this round.
  void JudgeWindow(int id, std::vector<Event>* events);
  void JudgeStraggler(int id, std::vector<Event>* events);
  // A straggler whose window has settled since its last event and whose slowdown then
  // rose min_slowdown times over that level for onset_evaluations rounds: an update
  // event (returns true).
  bool WindowRise(int id, std::vector<Event>* events);
  // Appends a kStraggler event of `id` (an onset or an update) and notes when it was.
  void EmitStraggler(int id, std::vector<Event>* events);
  void UpdateWorkerStats(int id);
  void UpdateStepLevel(int id);
  // Ring slot of the worker's i-th newest sample (0 = newest).
  size_t Newest(const Worker& w, int id, size_t i) const;
  // Median of the worker's samples in `ring` other than its newest step_samples; 0 if
  // it has no others.
  double PriorMedian(int id, const std::vector<double>& ring);
  // Whether workers' levels are the newest onset_window samples (see the option).
  bool ShortLevel() const;
  // kMad: the slowdown a worker must reach to be flagged (static_slowdown until it has
  // a baseline, then min_slowdown over its baseline) and the one it must return under.
  double OnsetFloor(const Worker& w) const;
  double RecoveryFloor(const Worker& w) const;
  // `mad_floor`: the slowdown rule mad requires (the other rules ignore it).
  bool OnsetCondition(const Worker& w, double mad_floor) const;
  bool MadRecovered(const Worker& w) const;
  bool RecoveryCondition(const Worker& w) const;
  bool PersistedLongEnough(const Worker& w, int streak, int needed) const;
  // Excess seconds of compute and communication over the reference worker.
  void Excess(const Worker& w, double* compute, double* comm) const;
  api::StragglerCause DominantCause(const Worker& w) const;
  Event StragglerEvent(int id, const Worker& w) const;

  DetectorOptions options_;
  std::vector<Worker> workers_;
  // Ring buffers, `window` entries per worker id.
  std::vector<double> total_, compute_, comm_;
  int num_workers_ = 0;    // 1 + largest id seen (workers_ may be larger)
  int known_workers_ = 0;
  int64_t max_iteration_ = -1;
  int64_t pending_ = 0;  // samples since the last round
  int at_max_ = 0;       // known workers whose last iteration is max_iteration_
  // Scratch buffers (sized once per worker id, reused every round).
  std::vector<double> scratch_window_;
  std::vector<double> scratch_a_, scratch_b_, scratch_c_, scratch_d_;
  std::vector<int> ready_;
  std::vector<int> reference_;  // the ready workers the cohort statistics come from
  bool split_ = false;          // the last round's cohort showed two classes
  double class_scale_ = 1;      // then: typical of all / typical of the faster class
  std::vector<char> in_window_;  // per worker id: in ready_ this round
  // Cohort statistics of the round being evaluated.
  double typical_ = 0, typical_compute_ = 0, typical_comm_ = 0, typical_mean_ = 0;
  double fastest_ = 0, sigma_ = 0;
  double typical_step_ = 0, typical_step_compute_ = 0, typical_step_comm_ = 0;
};

}  // namespace star::detect
