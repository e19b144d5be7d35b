// JobControlLoop: one job's controller without Kubernetes ("local mode", and the core of
// the operator). Worker reports go in; core decisions come out (detect stragglers,
// select the sync mode, per-worker AMP, per-worker batches), and a timeline of every
// change is kept.
//
// Pure like core: no clock (time is the reports' time_seconds), no I/O, no threads,
// no logging. Not thread-safe; one instance per job. Copyable.
//
// How it decides
// --------------
// * Baseline. Before any decision the job runs SSGD with k = n, AMP off and equal
//   batches (batch::EqualBatches: global / n, the remainder to the lowest ranks): the
//   launcher starts
//   the workers that way. A Decision is issued only when something differs from the
//   current one (mode, k, groups, any worker's amp or batch), so a clean run issues NO
//   decision at all and Observe keeps returning nullopt. The first Decision has epoch 1.
// * Rounds. A round closes when every worker 0..n-1 has reported since the previous
//   round. At each round close the AMP policy observes every worker's detector state.
//   The loop re-decides at every `decide_every_rounds`-th round, at a round where the
//   AMP policy flipped a worker or the runtime found nothing to give a straggler
//   (NoteUnmetNeeds), and immediately on a report whose detector sample raised,
//   reclassified or cleared a straggler.
// * Mode (spec.synchronization.policy): Auto -> select::Select. While no worker
//   straggles, or every straggler is a compute straggler that AMP handles (AMP on for
//   less than a detection window, or not yet on: AMP is tried first, being local and
//   cheap), the job stays SSGD; while the detector flags nobody and no worker runs AMP
//   (nor switched it within a detection window), Select's choice replaces SSGD only
//   when it is estimated `auto_switch_margin` faster than SSGD and the slowest worker
//   is `auto_min_spread` times the fastest (noise must not switch modes; with half of
//   the workers slow the detector flags nobody). That gate guards SSGD only: a job
//   already out of SSGD follows Select's choice whether flags lapse or not (with two of
//   four workers slow, flags come and go every few seconds). After a mode change the
//   mode holds for `mode_dwell_rounds` rounds. Select runs on each worker's iteration time (compute + communication): the
//   detector's windowed median once its window is full, before that the mean over the
//   last `time_window` reports,
//   batch_per_worker = global / n, and the online noise scale (NoiseScaleEstimator fed
//   with reports that carry both gradient norms) or `default_noise_scale` until it has
//   an estimate. SSGD / ASGD map to that mode; FixedK uses k = max(StarKStar, minK)
//   clamped to [1, n]; Groups uses select::ClusterByTime. For fixed_k the decision's
//   groups are [all ranks fastest first]; a reordering that keeps the same first k
//   (ring) members is not a change.
// * Learned selector (spec.synchronization.selector ML, policy Auto): with a model
//   (LearnedModel), select::SelectLearned replaces select::Select above, with the same
//   gating (its estimate is compared with SSGD's cost model); a model that fails for a
//   decision gives way to Select for that decision. Without a model the loop uses
//   Select. Either way the first fallback appends one selector_fallback event naming
//   why (at time 0 when there is no model; at the report's time when the model failed),
//   never more than one per loop. selector Heuristic ignores any model.
// * AMP: amp::AmpPolicy (compute stragglers only; spec.mitigation.amp.enabled). AMP
//   hides the contention it offsets, so a worker running AMP counts as still contended
//   while its compute per sample with AMP times AMP's speedup (measured a detection
//   window after AMP went on, against its full-precision time when it went on) exceeds
//   `amp_release_slowdown` x the typical full-precision worker's; AMP does not flap.
// * Batches (BOA: static stragglers get batches): once a STATIC straggler was seen
//   with spec.mitigation.batchAdaptation.enabled, batches are planned from then on by
//   batch::PlanBatches on per-worker linear fits of compute_seconds over local_batch
//   (batch::FitLinear on the last `time_window` reports; with fewer than 2 distinct
//   batch sizes alpha = mean t / b, beta = 0). A new plan replaces the current batches
//   only if it lowers the modelled makespan by more than `min_batch_gain` (no jitter).
//   Otherwise batches stay equal.
// * apply_at_iteration = the largest iteration any worker reported + apply_margin,
//   times (slowest / fastest worker time, at most 50) when the mode in force lets the
//   fastest run ahead by that much (fixed_k below n, two or more groups, asgd: the
//   slowest must report before they get there); in a mode that keeps every worker in
//   step (ssgd, fixed_k of n, one group of all) the margin is not scaled. A
//   new decision waits until every worker has reported an iteration at or past the
//   previous decision's apply_at_iteration (workers learn only the newest decision, so
//   one that never saw the previous decision would not make its switch).
// * Pipelines (spec.parallelism.pipelineStages > 1): no mode, AMP or batch decision (a
//   mode would split the stages; the stages share their replica's batch). Under Auto the
//   pipeline model (star/core/pipeline/schedule.h) runs on every stage's latest costs
//   (report.pipeline; per stage and link the slowest replica's) at each decision:
//   pipeline::ChooseWarmup's depths within maxInFlightPerStage replace the schedule in
//   force when predicted `schedule_gain` faster. Every prediction adds the iteration's
//   work outside the schedule (the recent measured iteration beyond the model's time for
//   the schedule in force, at least 0), so gains are judged, and predictions written,
//   against whole iterations. Adapted depths go back to the static
//   schedule (taken to be plain 1F1B) once that is predicted within schedule_gain / 2 of
//   them (the slow link recovered). Each change is a decision (warmup, and the model's
//   predicted iteration time) every stage takes up at its apply iteration, and a
//   schedule event naming the slowest link's two stages. A change waits until the model
//   has wanted one for half a detection window of rounds. Adopted depths are on trial
//   (JudgeScheduleTrial): measured no faster than the static schedule was, they give way
//   to it, and the model is not followed again for a hold (4 detection windows of
//   rounds, doubling on each failed trial).
// * Reallocation: the loop keeps a request of the workers that need resources
//   (resource_needs.h has the rule); the runtimes plan and apply it.
// * Accuracy: test accuracies the trainer measured (a report's accuracy, or
//   ObserveAccuracy for an evaluator beside the workers) make the accuracy curve; the
//   first one at or above spec.training.targetAccuracy, in arrival order, sets the TTA
//   (its time) for good and appends a target_reached event. Accuracy does not feed the
//   decisions.
// * Timeline: every change (straggler, recovered, mode, amp_on / amp_off, batches,
//   target_reached, selector_fallback) is appended as a typed TimelineEvent (timeline.h).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "star/core/amp/policy.h"
#include "star/core/api/decision.h"
#include "star/core/api/training_job.h"
#include "star/core/api/worker_report.h"
#include "star/core/batch/planner.h"
#include "star/core/converge/noise_scale_estimator.h"
#include "star/core/detect/detector.h"
#include "star/core/detect/links.h"
#include "star/core/pipeline/schedule.h"
#include "star/core/select/learned.h"
#include "star/core/status.h"
#include "star/operator/loop_options.h"
#include "star/operator/resource_needs.h"
#include "star/operator/timeline.h"

namespace star::op {

// The learned selector a runtime offers its jobs' loops (used only by jobs with
// spec.synchronization.selector ML). The model is shared, not copied: loops sharing one
// call it from Observe only, so the caller serialises Observe across them (the model
// need not be thread-safe).
struct LearnedModel {
  // The model; nullptr when none is usable.
  std::shared_ptr<select::LearnedSelector> selector;
  // Why there is none, the detail of the loop's selector_fallback event (for example
  // "cannot open /usr/share/star/selector.json"). Default "no model given".
  std::string unavailable_reason = "no model given";
};

// The largest iteration a report may carry and a decision may apply at (2^40: beyond any
// training run, and what the training shim's engines carry exactly). A report past it is
// refused; a decision that would apply past it is not issued.
inline constexpr int64_t kMaxIteration = int64_t{1} << 40;

// Whether a job's loop selects its mode with the learned selector: selector ML with
// policy Auto (any other policy selects nothing).
[[nodiscard]] bool UsesLearnedSelector(const api::TrainingJobSpec& spec);

class JobControlLoop {
 public:
  // Errors: InvalidArgument from api::Validate(spec) or naming a bad option
  // ("options.decide_every_rounds: must be >= 1, got 0"). A job with selector ML and
  // policy Auto but no `learned.selector` starts with a selector_fallback event at
  // time 0 whose detail is `learned.unavailable_reason`.
  [[nodiscard]] static StatusOr<JobControlLoop> Create(const api::TrainingJobSpec& spec,
                                                       LoopOptions options = {},
                                                       LearnedModel learned = {});

  // Feeds one report. Returns the Decision to send back on this report's response: the
  // latest decision (so every worker learns it on its next report), or nullopt before
  // any. Errors (InvalidArgument naming the field, nothing changes): worker outside
  // [0, n); iteration < 0, above kMaxIteration or lower than this worker's previous
  // report; iterations < 1;
  // negative or non-finite times; local_batch < 1; negative or non-finite gradient
  // norms; accuracy not finite or outside [0, 1]; accuracy_time_seconds negative or
  // non-finite. A report with accuracy is observed as ObserveAccuracy(
  // accuracy_time_seconds, or time_seconds when that is unset, accuracy) AFTER its
  // timing (so a target_reached event follows the events of the report's timing).
  // Amortised O(window + n) per report; a decision costs Select's and PlanBatches'
  // complexity.
  [[nodiscard]] StatusOr<std::optional<api::Decision>> Observe(const api::WorkerReport& report);

  // Records a test accuracy measured at job time `t` (seconds, the reports' clock):
  // appends (t, accuracy) to the accuracy curve, makes it the latest accuracy and, the
  // first time accuracy >= spec.training.targetAccuracy, sets the TTA to t and appends a
  // target_reached event at t. Without a targetAccuracy there is never a TTA; once set,
  // later (lower) accuracies do not change it. InvalidArgument, and nothing changes,
  // unless t is finite and >= 0 ("accuracy_time_seconds: ...") and accuracy is finite
  // and in [0, 1] ("accuracy: ..."). O(1) amortised.
  [[nodiscard]] Status ObserveAccuracy(double t, double accuracy);
  // Every accuracy observed, as (t, accuracy), in arrival order.
  [[nodiscard]] const std::vector<std::pair<double, double>>& accuracy_curve() const {
    return accuracy_curve_;
  }
  // The latest accuracy observed (by arrival); nullopt before any.
  [[nodiscard]] std::optional<double> accuracy() const {
    return accuracy_curve_.empty() ? std::nullopt
                                   : std::optional<double>(accuracy_curve_.back().second);
  }
  // The time to accuracy: the t of the first accuracy >= spec.training.targetAccuracy;
  // nullopt before that and for a job without a target.
  [[nodiscard]] std::optional<double> tta_seconds() const { return tta_; }

  // Every change so far, in order.
  [[nodiscard]] const std::vector<TimelineEvent>& timeline() const { return timeline_; }
  // The workers that need resources now (resource_needs.h); changes only at round closes.
  [[nodiscard]] const ResourceNeeds& resource_needs() const { return needs_; }
  // The runtime that acted on request `revision` found nothing to give these workers
  // (no co-located sender to cap, or a plan not worth its cost). A communication
  // straggler among them is the mode's at once instead of after a detection window;
  // until it leaves the request or changes cause; the loop decides at the next round
  // close (not at its next periodic decision). A stale revision is ignored.
  void NoteUnmetNeeds(int64_t revision, const std::vector<int>& workers);
  // Workers the detector currently flags, ascending.
  [[nodiscard]] std::vector<int> stragglers() const { return detector_.Stragglers(); }
  // The detector's view of one worker (straggling, cause, kind, slowdown).
  [[nodiscard]] detect::WorkerView straggler_view(int worker) const {
    return detector_.View(worker);
  }
  // The latest decision; nullptr before any.
  [[nodiscard]] const api::Decision* current() const {
    return decision_ ? &*decision_ : nullptr;
  }
  // Resumes from `decision`, the latest one an earlier instance of this job's loop
  // issued (a restarted controller): it becomes the state in force and current() (so
  // the next decision's epoch follows it: workers ignore epochs they have seen), and the
  // mode dwell starts over. Call before any Observe. InvalidArgument when it does not fit
  // the job (api::Validate, a worker setting per rank) or reports were observed already.
  [[nodiscard]] Status Resume(const api::Decision& decision);
  // Without a decision to resume (it does not fit a changed spec): the next decision's
  // epoch is at least `epoch` + 1.
  void ContinueEpochs(int64_t epoch) { epoch_base_ = std::max(epoch_base_, epoch); }

  // Per worker: its iteration time excluding waiting on peers (the detector's windowed
  // median once its window is full, else the median of the reports so far, the first
  // (the startup) left out once there are more); 0 before any.
  [[nodiscard]] std::vector<double> worker_seconds() const { return MedianIterationSeconds(); }
  [[nodiscard]] int num_workers() const { return n_; }
  // Completed rounds.
  [[nodiscard]] int64_t rounds() const { return rounds_; }
  // The job time (time_seconds) at which the target accuracy is estimated to be reached:
  // tta_seconds() once the target was reached. Before that the accuracies so far do not
  // extrapolate reliably: spec.training.maxIterations stands for the iterations the
  // target needs, reached at the mean rate so far, i.e. latest time_seconds x
  // maxIterations / largest iteration reported. nullopt without targetAccuracy, or
  // (before the target) without maxIterations or before a report with iteration > 0 and
  // time_seconds > 0.
  [[nodiscard]] std::optional<double> estimated_tta_seconds() const;

 private:
  struct WorkerData {
    int64_t last_iteration = -1;
    // Last time_window reports: (local_batch, compute_seconds) and iteration_seconds.
    std::vector<std::pair<double, double>> batch_compute;
    std::vector<bool> batch_amp;  // the AMP flag of each batch_compute sample
    std::vector<double> iteration_seconds;
    int next = 0;  // ring position
    int64_t reports = 0;  // recorded so far
    // Compute seconds per sample, exponential moving averages over reports without and
    // with AMP; the fp32 one when AMP last went on; AMP's measured speedup (0 unknown).
    double ema_fp32 = 0;
    double ema_amp = 0;
    int amp_samples = 0;
    double fp32_at_amp_on = 0;
    // The newest two full-precision reports' compute per sample, older first (0: none).
    std::array<double, 2> newest_fp32{};
    double amp_speedup = 0;
    // AMP was measured slower than full precision on this worker (no native bf16, say):
    // it is turned off and not used for the worker again.
    bool amp_hurts = false;
    // Batches the worker's data loader had drawn past its iteration at its last report.
    int lookahead = 0;
    // A pipeline stage's latest costs.
    std::optional<api::PipelineReading> pipeline;
  };
  // How the job synchronises: mode, k and groups of a decision.
  struct SyncSetting {
    api::SyncMode mode = api::SyncMode::kSsgd;
    int k = 1;
    std::vector<std::vector<int>> groups;
    friend bool operator==(const SyncSetting&, const SyncSetting&) = default;
  };
  // A worker's place in the reallocation request (resource_needs.h).
  struct NeedHold {
    int quiet = 0;           // round closes without the need, while listed
    int release_rounds = 1;  // quiet rounds before it leaves (doubles on each return)
    bool released = false;   // it left the request and has not returned since
    int64_t since_round = -1;  // the round it entered the request (or changed cause)
    bool unmet = false;        // the runtime had nothing to give it (NoteUnmetNeeds)
    int64_t given_back_round = -1;  // the round a communication need left the request
  };
  // A worker's own communication while its link is not measured (alone in a group, a
  // fixed-k child, parameter servers): what it was when last measured, for a while.
  struct LinkHold {
    double communication_seconds = 0;
    int reports_left = 0;
  };
  // Everything a decision sets.
  struct Setting {
    SyncSetting sync;
    std::vector<bool> amp;
    std::vector<int64_t> batches;
    std::vector<int> warmup;  // a pipeline's depths; empty = its static schedule
    friend bool operator==(const Setting&, const Setting&) = default;
  };

  JobControlLoop(api::TrainingJobSpec spec, LoopOptions options, amp::AmpPolicy amp);
  // The setting `d` describes, or InvalidArgument when it does not fit this job.
  [[nodiscard]] StatusOr<Setting> SettingOf(const api::Decision& d) const;

  // Observe's steps (control_loop.cc, worker_stats.cc).
  [[nodiscard]] Status CheckReport(const api::WorkerReport& r) const;
  // ObserveAccuracy's checks (report_check.cc), and its work on checked values (accuracy.cc).
  [[nodiscard]] static Status CheckAccuracy(double t, double accuracy);
  void RecordAccuracy(double t, double accuracy);
  void RecordSample(const api::WorkerReport& r);
  void ObserveNoise(const api::WorkerReport& r);
  // Feeds the detector; records its events. True when any state changed.
  bool ObserveDetector(const api::WorkerReport& r);
  // The detector's events on the timeline at time `t` (a static straggler turns batch
  // adaptation on when the spec allows it).
  void RecordDetectorEvents(double t, const std::vector<detect::Event>& events);
  // `r` with its compute scaled to the worker's equal share of the global batch: the
  // detector compares speeds, so batches the loop moved neither make the workers given
  // more samples look slow nor make a straggler given fewer look recovered.
  api::WorkerReport AtEqualBatch(const api::WorkerReport& r) const;
  // `r` with only the part of its communication that is its own (LinkTable::OwnShare,
  // as of the last round close): in a ring everyone reports the slow link's time, which
  // belongs to one worker. Keeps r's link reading for the round close. A worker whose
  // link stops being measured keeps its last own communication until it is measured
  // again, for at most 16 detection windows of reports (one taken out of the ring for
  // its link does not look recovered, which would bring it back at once).
  api::WorkerReport OwnCommunication(const api::WorkerReport& r);
  // Counts the report toward the round; at a round close runs the AMP policy and the
  // reallocation rule. True when the round calls for a decision.
  bool CountTowardRound(int worker, double time_seconds);
  // Flags, as a communication straggler, a worker whose link became strong evidence
  // (LinkTable::StrongSlowdown) at this round close; once per episode of that evidence,
  // so one the detector found recovered is not flagged again while it lasts. True when
  // it flagged anyone.
  bool FlagStrongLinks(double time_seconds);
  bool RecentlyGivenBack(int worker) const;
  // Runs the AMP policy over every worker; true when it turned AMP on or off anywhere.
  bool ObserveAmp(double typical);
  void UpdateResourceNeeds(double typical);
  // `worker`'s entry in the request after this round (`listed`: its entry before it,
  // or nullptr); nullopt when it is not (or no longer) in it.
  [[nodiscard]] std::optional<ResourceNeed> NeedOf(int worker, const ResourceNeed* listed,
                                                   double typical);
  // A worker (re)enters the request: a return after a release doubles its hold.
  void Reenter(NeedHold& hold) const;

  // Decide's steps (decide.cc, mode.cc, batches.cc, pipeline_schedule.cc).
  void Decide(double t);
  // A pipeline job's decision: only its warm-up depths change (modes would split its
  // stages; its stages share their replica's batch).
  void DecidePipeline(double t);
  // The depths the next decision carries (Auto only; else those in force), and the
  // schedule event when they change.
  [[nodiscard]] std::vector<int> ChoosePipelineWarmup(std::optional<ScheduleFields>* event);
  // The model's costs from every stage's latest reading (the slowest replica's per stage
  // and link); nullopt until every stage has reported one.
  [[nodiscard]] std::optional<pipeline::PipelineCosts> PipelineCostsNow() const;
  // Adopted depths are on trial until every stage has reported a detection window twice
  // over under them: then they stay only if the measured iteration beats the static
  // schedule's by schedule_gain / 2; else the static schedule comes back and the model is
  // not followed again for a hold that doubles each time. `*verdict` is the static
  // schedule's event on a failed trial; the depths to carry next either way.
  [[nodiscard]] std::vector<int> JudgeScheduleTrial(std::optional<ScheduleFields>* verdict);
  // The job's iteration time now: the slowest stage's mean over its newest `reports`.
  [[nodiscard]] double RecentIterationSeconds(int reports) const;
  [[nodiscard]] bool PreviousDecisionApplied() const;
  // `t`: the time of the report that asked for the decision (for a selector_fallback).
  [[nodiscard]] SyncSetting ChooseSync(const std::vector<double>& times, double t);
  [[nodiscard]] std::optional<SyncSetting> ChooseAutoSync(const std::vector<double>& times, double t);
  // Whether Auto leaves the mode in force for `sel`'s: always to or from SSGD; from one
  // other mode to another only for a gain of options_.mode_switch_margin by Select's
  // estimates (near-equal modes would flip on noise).
  [[nodiscard]] bool WorthLeaving(const select::Selection& sel) const;
  // Auto's selection: the learned selector's when the job asks for it and it works,
  // else Select's (recording the first fallback).
  // Whether every worker's detector window is full (the detector has judged it).
  [[nodiscard]] bool EveryWorkerJudged() const;
  [[nodiscard]] StatusOr<select::Selection> SelectMode(const select::SelectionInput& in, double t);
  // SelectMode for a job whose batches are adapted: ssgd, fixed_k and asgd judged at
  // BalancedTimes, groups at the measured times.
  [[nodiscard]] StatusOr<select::Selection> SelectWithPlannedBatches(const select::SelectionInput& in,
                                                                     double t);
  // Each worker's iteration time once one barrier of all workers runs the batches
  // planned from their fitted speeds: its communication (time less its fitted compute
  // at its equal share) plus the plan's makespan. `times` if no plan can be made.
  [[nodiscard]] std::vector<double> BalancedTimes(const std::vector<double>& times) const;
  void RecordSelectorFallback(double t, std::string reason);
  // The mean over workers of communication / (compute + communication), in [0, 1].
  [[nodiscard]] double CommunicationShare() const;
  [[nodiscard]] SyncSetting FromSelection(const select::Selection& sel,
                                          const std::vector<double>& times) const;
  [[nodiscard]] SyncSetting KeepRing(SyncSetting next) const;
  [[nodiscard]] bool AmpInPlay() const;
  [[nodiscard]] double NoiseScale() const;
  [[nodiscard]] double BatchPerWorker() const;
  // Batches for `sync`: each set of workers planned together (every worker, or each
  // group in groups mode) shares its equal shares by the workers' fits (batches.cc).
  [[nodiscard]] std::vector<int64_t> PlanWorkerBatches(const std::vector<int64_t>& current,
                                                       const SyncSetting& sync) const;
  [[nodiscard]] std::vector<std::vector<int>> Barriers(const SyncSetting& sync) const;
  [[nodiscard]] batch::WorkerModel FitWorker(int worker) const;
  [[nodiscard]] std::optional<api::Decision> Issue(const Setting& next,
                                                   const std::vector<double>& times) const;
  // The iteration a decision issued now applies at (Issue's rule).
  [[nodiscard]] int64_t ApplyAtIteration(const std::vector<double>& times) const;
  // Whether `next` switches the job from a drifting mode to another (a new mode, k or
  // groups) with a wait at the apply iteration above options_.max_drift_wait_seconds
  // (LoopOptions). New batches or AMP flags alone are no switch: workers take them up
  // at the apply iteration each on its own.
  [[nodiscard]] bool DriftWaitTooLong(const Setting& next, const std::vector<double>& times) const;
  // Of each worker's estimated seconds to the apply iteration, when the workers that
  // would wait at it start waiting: the first to arrive, or in fixed_k over all-reduce the
  // ring.
  [[nodiscard]] double FirstToWait(const std::vector<double>& arrive) const;
  void RecordChanges(double t, const Setting& next);

  // Per-worker statistics (worker_stats.cc).
  // Per worker: the detector's windowed median of iteration_seconds once its window is
  // full, else the median of the last time_window reports without the worker's first
  // (its startup) once there are more; 0 before any.
  [[nodiscard]] std::vector<double> MedianIterationSeconds() const;
  // fixed_k's view of `times` (MedianIterationSeconds), for its ring order and, in
  // policy fixed-k, its k: a worker whose newest 3 reports have a median at least the
  // detector's min_slowdown times its entry takes that median. A worker slowed since its
  // window began (a step the detector has not flagged yet) then ranks behind the fast
  // ones, where its older reports would have placed it among them in the ring. Only
  // ever slower: a worker that recovers is read from its window, as before.
  [[nodiscard]] std::vector<double> RingSeconds(std::vector<double> times) const;
  // The median of worker's newest `count` reports, none of them its first; 0 if there
  // are not that many.
  [[nodiscard]] double RecentMedianSeconds(int worker, int count) const;
  // Whether a worker running AMP would still straggle without it (see the options).
  [[nodiscard]] bool StillContended(int worker, double typical) const;
  // A worker running AMP: its full-precision equivalent compute per sample over the
  // typical worker's (the detector's slowdown while AMP's speedup is not measured yet).
  [[nodiscard]] double AmpEquivalentSlowdown(int worker, double typical) const;
  void MeasureAmpSpeedup(int worker);
  // Mean compute seconds per sample over the window (0 before any report).
  [[nodiscard]] double ComputePerSample(int worker) const;
  [[nodiscard]] double TypicalComputePerSample() const;  // median over workers
  // Stragglers the sync mode must handle: all of them, except compute stragglers that
  // AMP is (about to be) handling and has had less than a detection window to fix, and
  // communication stragglers whose bandwidth request is younger than a detection window
  // and not known to be unmet (reallocation's turn first, as AMP's for compute).
  [[nodiscard]] std::vector<int> ModeStragglers() const;
  [[nodiscard]] bool ReallocationPending(int worker) const;
  [[nodiscard]] int64_t UpdateBatch(int worker) const;
  [[nodiscard]] int64_t MinIteration() const;  // the lowest last reported iteration

  api::TrainingJobSpec spec_;
  LoopOptions options_;
  int n_ = 0;
  detect::Detector detector_;
  detect::LinkTable links_;  // the ring's links (reports' link readings)
  std::vector<std::pair<int, api::LinkReading>> round_links_;  // this round's, by receiver
  std::vector<LinkHold> link_holds_;  // by worker
  std::vector<char> strong_link_;     // by worker: its link is strong evidence (FlagStrongLinks)
  amp::AmpPolicy amp_;
  converge::NoiseScaleEstimator noise_;
  std::vector<WorkerData> workers_;
  std::vector<bool> reported_;  // since the last round
  int reported_count_ = 0;
  int64_t rounds_ = 0;
  int64_t max_iteration_ = -1;
  double latest_time_ = 0;  // the largest time_seconds reported
  bool adapt_batches_ = false;  // a static straggler was seen (sticky)
  std::optional<api::Decision> decision_;
  bool decision_switches_ = true;  // decision_ changes the synchronisation (or was restored)
  Setting in_force_;  // the baseline before any decision
  double predicted_iteration_seconds_ = 0;  // the pipeline model's, for in_force_.warmup
  int slow_link_ = -1;                      // the link in_force_.warmup absorbs, or -1
  // The trial of adopted depths (JudgeScheduleTrial): since which round, against which
  // static iteration time; the round the model may be followed again, the next hold.
  struct ScheduleTrial {
    // Whether the model wants a change, and since when: a change waits until it has
    // wanted one for half a detection window of rounds (then its latest choice is taken).
    bool wants_change = false;
    int64_t proposed_round = 0;
    bool open = false;
    int64_t since_round = 0;
    double static_seconds = 0;
    int64_t hold_until_round = 0;
    int64_t hold_rounds = 0;
  };
  ScheduleTrial schedule_trial_;
  std::vector<int64_t> equal_batches_;  // each worker's equal share of the global batch
  std::vector<TimelineEvent> timeline_;
  int64_t last_mode_round_ = -1;        // round of the last mode change
  bool redecide_ = false;               // a decision waits for the previous one to apply
  bool unmet_news_ = false;             // NoteUnmetNeeds handed the mode a worker: decide
  int64_t last_amp_change_round_ = -1;  // round of the last AMP on/off of any worker
  std::vector<int64_t> amp_on_round_;   // per worker: round AMP last went on; -1 never
  int64_t epoch_base_ = 0;              // epochs an earlier loop issued (ContinueEpochs)
  ResourceNeeds needs_;
  std::vector<NeedHold> need_holds_;  // per worker
  std::vector<std::pair<double, double>> accuracy_curve_;  // (t, accuracy), by arrival
  std::optional<double> tta_;                              // the target's first crossing
  LearnedModel learned_;
  bool selector_fallback_recorded_ = false;  // at most one selector_fallback event
};

}  // namespace star::op
