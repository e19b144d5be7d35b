#include "star/operator/control_loop.h"

#include <string>
#include <utility>

#include "star/core/batch/baseline.h"

namespace star::op {

StatusOr<JobControlLoop> JobControlLoop::Create(const api::TrainingJobSpec& spec,
                                                LoopOptions options, LearnedModel learned) {
  STAR_RETURN_IF_ERROR(api::Validate(spec));
  STAR_RETURN_IF_ERROR(Validate(options));
  const api::DetectionSpec& det = spec.mitigation.detection;
  options.detector.rule = det.rule;
  options.detector.window = det.window;
  options.detector.threshold = det.threshold.value_or(0);
  if (Status s = detect::Validate(options.detector); !s.ok()) {
    return s.WithPrefix("spec.mitigation.detection");
  }
  options.amp.enabled = api::MitigationsInForce(spec).mitigation.amp.enabled;
  if (Status s = amp::Validate(options.amp); !s.ok()) return s.WithPrefix("options.amp");
  options.select.min_k = spec.synchronization.min_k.value_or(1);
  if (Status s = select::Validate(options.select); !s.ok()) {
    return s.WithPrefix("options.select");
  }
  STAR_ASSIGN_OR_RETURN(converge::NoiseScaleEstimator noise,
                        converge::NoiseScaleEstimator::Create(options.noise_scale));
  amp::AmpPolicy amp(options.amp);
  JobControlLoop loop(api::MitigationsInForce(spec), std::move(options), std::move(amp));
  loop.noise_ = std::move(noise);
  loop.learned_ = std::move(learned);
  if (UsesLearnedSelector(loop.spec_) && loop.learned_.selector == nullptr) {
    loop.RecordSelectorFallback(0, loop.learned_.unavailable_reason);
  }
  return loop;
}

JobControlLoop::JobControlLoop(api::TrainingJobSpec spec, LoopOptions options,
                               amp::AmpPolicy amp)
    : spec_(std::move(spec)),
      options_(std::move(options)),
      n_(api::WorldSize(spec_)),
      detector_(options_.detector),
      links_(n_),
      link_holds_(static_cast<size_t>(n_)),
      strong_link_(static_cast<size_t>(n_), 0),
      amp_(std::move(amp)),
      workers_(static_cast<size_t>(n_)),
      reported_(static_cast<size_t>(n_), false),
      in_force_{.sync = {api::SyncMode::kSsgd, n_, {}},
                .amp = std::vector<bool>(static_cast<size_t>(n_), false),
                .batches = batch::EqualBatches(spec_.training.global_batch_size, n_),
                .warmup = {}},
      equal_batches_(in_force_.batches),
      amp_on_round_(static_cast<size_t>(n_), -1),
      need_holds_(static_cast<size_t>(n_), NeedHold{.release_rounds = options_.resource_release_rounds}) {}

StatusOr<JobControlLoop::Setting> JobControlLoop::SettingOf(const api::Decision& d) const {
  STAR_RETURN_IF_ERROR(api::Validate(d, "decision"));
  if (static_cast<int>(d.workers.size()) != n_) {
    return Status::InvalidArgument("decision.workers: must have one entry per worker (" +
                                   std::to_string(n_) + "), got " + std::to_string(d.workers.size()));
  }
  Setting s{{d.mode, d.k, d.groups},
            std::vector<bool>(static_cast<size_t>(n_), false),
            std::vector<int64_t>(static_cast<size_t>(n_), 0),
            {}};
  for (const api::WorkerSetting& w : d.workers) {
    if (w.worker < 0 || w.worker >= n_ || s.batches[static_cast<size_t>(w.worker)] != 0) {
      return Status::InvalidArgument("decision.workers: must list each rank in [0, " + std::to_string(n_) +
                                     ") once, got rank " + std::to_string(w.worker));
    }
    s.amp[static_cast<size_t>(w.worker)] = w.amp;
    s.batches[static_cast<size_t>(w.worker)] = w.batch;
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
  const int stages = spec_.parallelism.pipeline_stages;
  if (!d.warmup.empty() && (stages < 2 || static_cast<int>(d.warmup.size()) != stages)) {
    return Status::InvalidArgument("decision.warmup: must have one depth per pipeline stage (" +
                                   std::to_string(stages < 2 ? 0 : stages) + "), got " +
                                   std::to_string(d.warmup.size()));
  }
  s.warmup = d.warmup;
  return s;
}

Status JobControlLoop::Resume(const api::Decision& d) {
  if (rounds_ > 0 || max_iteration_ >= 0) {
    return Status::InvalidArgument("decision: a loop resumes before any report");
  }
  STAR_ASSIGN_OR_RETURN(Setting setting, SettingOf(d));
  for (int i = 0; i < n_; ++i) {
    const bool on = setting.amp[static_cast<size_t>(i)];
    if (spec_.mitigation.amp.enabled) amp_.Restore(i, on);
    if (on) {
      amp_on_round_[static_cast<size_t>(i)] = 0;
      // AMP's speedup was measured by the earlier loop: taken as none, so AMP stays on
      // only while the worker is slow even with it (else it goes off, and on again with
      // a fresh measurement if the contention is still there).
      workers_[static_cast<size_t>(i)].amp_speedup = 1;
    }
  }
  // Unequal batches mean batch adaptation was on.
  adapt_batches_ = setting.batches != batch::EqualBatches(spec_.training.global_batch_size, n_);
  in_force_ = std::move(setting);
  predicted_iteration_seconds_ = d.predicted_iteration_seconds;
  slow_link_ = d.slow_link;
  last_mode_round_ = 0;
  decision_ = d;
  return Status::Ok();
}

StatusOr<std::optional<api::Decision>> JobControlLoop::Observe(const api::WorkerReport& r) {
  STAR_RETURN_IF_ERROR(CheckReport(r));
  const api::WorkerReport own = OwnCommunication(r);
  RecordSample(own);
  ObserveNoise(own);
  bool decide = ObserveDetector(own);
  if (CountTowardRound(r.worker, r.time_seconds)) decide = true;
  if (redecide_ && decision_ && MinIteration() >= decision_->apply_at_iteration) decide = true;
  if (decide) Decide(r.time_seconds);
  if (r.accuracy) RecordAccuracy(r.accuracy_time_seconds.value_or(r.time_seconds), *r.accuracy);
  return decision_;
}

bool JobControlLoop::ObserveDetector(const api::WorkerReport& r) {
  std::vector<detect::Event> events;
  // Warm-up iterations (allocator, caches, connections) say nothing about stragglers.
  if (r.iteration > options_.warmup_iterations) detector_.Observe(AtEqualBatch(r), &events);
  RecordDetectorEvents(r.time_seconds, events);
  return !events.empty();
}

void JobControlLoop::RecordDetectorEvents(double t, const std::vector<detect::Event>& events) {
  for (const detect::Event& e : events) {
    if (e.state == detect::State::kStraggler) {
      if (e.kind == api::StragglerKind::kStatic && spec_.mitigation.batch_adaptation.enabled) {
        adapt_batches_ = true;
      }
      timeline_.push_back(MakeStragglerEvent(t, e.worker, {e.cause, e.kind, e.slowdown}));
    } else {
      timeline_.push_back(MakeRecoveredEvent(t, e.worker));
    }
  }
}

api::WorkerReport JobControlLoop::OwnCommunication(const api::WorkerReport& r) {
  api::WorkerReport own = r;
  own.communication_seconds = r.communication_seconds * links_.OwnShare(r.worker);
  LinkHold& hold = link_holds_[static_cast<size_t>(r.worker)];
  if (r.link) {
    round_links_.emplace_back(r.worker, *r.link);
    hold = {own.communication_seconds, 16 * spec_.mitigation.detection.window};
  } else if (hold.reports_left > 0) {
    --hold.reports_left;
    own.communication_seconds = std::max(own.communication_seconds, hold.communication_seconds);
  }
  return own;
}

api::WorkerReport JobControlLoop::AtEqualBatch(const api::WorkerReport& r) const {
  const int64_t equal = equal_batches_[static_cast<size_t>(r.worker)];
  api::WorkerReport scaled = r;
  if (r.local_batch > 0 && r.local_batch != equal) {
    scaled.compute_seconds = r.compute_seconds * static_cast<double>(equal) / r.local_batch;
  }
  return scaled;
}

bool JobControlLoop::CountTowardRound(int worker, double time_seconds) {
  const size_t w = static_cast<size_t>(worker);
  if (!reported_[w]) {
    reported_[w] = true;
    ++reported_count_;
  }
  if (reported_count_ < n_) return false;
  ++rounds_;
  // The round's link readings count from the next round on, so that every report of a
  // round is judged against the same links.
  for (const auto& [receiver, reading] : round_links_) links_.Observe(receiver, reading);
  round_links_.clear();
  std::fill(reported_.begin(), reported_.end(), false);
  reported_count_ = 0;
  const bool flagged = FlagStrongLinks(time_seconds);
  const double typical = TypicalComputePerSample();
  const bool amp_changed = ObserveAmp(typical);
  UpdateResourceNeeds(typical);
  const bool unmet = std::exchange(unmet_news_, false);
  return flagged || amp_changed || unmet || rounds_ % options_.decide_every_rounds == 0;
}

bool JobControlLoop::FlagStrongLinks(double time_seconds) {
  bool flagged = false;
  for (int w = 0; w < n_; ++w) {
    char& evidence = strong_link_[static_cast<size_t>(w)];
    const double slowdown = links_.StrongSlowdown(w, RecentlyGivenBack(w));
    if (slowdown <= 0) {
      evidence = 0;
      continue;
    }
    if (evidence) continue;  // flagged on this evidence already (or straggling then)
    evidence = 1;
    std::vector<detect::Event> events;
    if (!detector_.Flag(w, api::StragglerCause::kCommunication, slowdown, &events)) continue;
    RecordDetectorEvents(time_seconds, events);
    flagged = true;
  }
  return flagged;
}

bool JobControlLoop::ObserveAmp(double typical) {
  for (int i = 0; i < n_; ++i) MeasureAmpSpeedup(i);
  std::vector<amp::AmpPolicy::Change> changes;
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
    // AMP measured slower than full precision here: off, and not on again.
    if (workers_[static_cast<size_t>(i)].amp_hurts) straggling = false;
    // Iterations are non-decreasing per worker (checked), so this cannot fail.
    (void)amp_.Observe(i, straggling, cause, workers_[static_cast<size_t>(i)].last_iteration,
                       &changes);
  }
  for (const auto& c : changes) {
    last_amp_change_round_ = rounds_;
    if (!c.amp) continue;
    WorkerData& cw = workers_[static_cast<size_t>(c.worker)];
    amp_on_round_[static_cast<size_t>(c.worker)] = rounds_;
    // Full precision's cost now: the newest two reports' mean (the moving average lags
    // a step the detector flagged within two reports), else the average.
    cw.fp32_at_amp_on = cw.newest_fp32[0] > 0 ? (cw.newest_fp32[0] + cw.newest_fp32[1]) / 2
                                               : cw.ema_fp32;
    cw.ema_amp = 0;
    cw.amp_samples = 0;
    cw.amp_speedup = 0;
  }
  return !changes.empty();
}

}  // namespace star::op
