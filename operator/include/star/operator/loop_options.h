// LoopOptions: the job control loop's tunables (the job's own settings come from its
// TrainingJobSpec).
#pragma once

#include <cstdint>

#include "star/core/amp/policy.h"
#include "star/core/converge/noise_scale_estimator.h"
#include "star/core/detect/detector.h"
#include "star/core/select/selector.h"
#include "star/core/status.h"

namespace star::op {

// SelectOptions{} with learned_override_margin 0.8 (see LoopOptions::select).
inline select::SelectOptions LoopSelectOptions() {
  select::SelectOptions o;
  o.learned_override_margin = 0.8;
  return o;
}

struct LoopOptions {
  // Re-decide every this many rounds (besides detector and AMP triggers). >= 1; default 10.
  int decide_every_rounds = 10;
  // A decision applies this many iterations after the largest reported one, so every
  // worker learns it (on its next report) before it applies. >= 0; default 5.
  int64_t apply_margin_iterations = 5;
  // Reports per worker kept for the mean iteration time and the batch fits. >= 1;
  // default 20.
  int time_window = 20;
  // Noise scale phi used by Auto/FixedK until the online estimate exists. >= 0;
  // default 1000 (samples; typical of small image models early in training).
  double default_noise_scale = 1000;
  // A new batch plan must lower the modelled makespan by more than this fraction of the
  // current batches' makespan. In [0, 1); default 0.15 (measured times are noisy:
  // smaller gains re-plan on noise).
  double min_batch_gain = 0.15;
  // Detector settings other than rule, window and threshold (those come from
  // spec.mitigation.detection). Default: DetectorOptions{} (each worker's level is its
  // full window's median: the newest-4 level, DetectorOptions::onset_window, flagged a
  // clean run's workers at 1.35x on a loaded 2-core machine). The detector sees each
  // report's compute scaled to the worker's equal batch (JobControlLoop::AtEqualBatch).
  detect::DetectorOptions detector;
  // AMP hysteresis (enabled comes from spec.mitigation.amp.enabled). Default AmpOptions{}.
  amp::AmpOptions amp;
  // Reports of iterations up to this one are not shown to the detector (warm-up:
  // allocator, caches, connections). >= 0; default 4: the first iterations' extra cost
  // is shared by every worker and a worker's level is a median, so a longer warm-up only
  // delays detection (20 iterations were 14 s of the demo's 30 s to flag a straggler).
  int64_t warmup_iterations = 4;
  // Auto in SSGD without a straggler the mode must handle: another mode replaces SSGD
  // only if Select estimates it at least this fraction faster than SSGD (out of SSGD,
  // Select's choice stands). In [0, 1); default 0.3.
  double auto_switch_margin = 0.3;
  // ... and only when the slowest worker is at least this many times slower than the
  // fastest (>= 1; default 1.5).
  double auto_min_spread = 1.5;
  // Auto: after a mode change, the mode stays for at least this many rounds. >= 0;
  // default 20.
  int mode_dwell_rounds = 20;
  // Auto: a mode other than SSGD gives way to another such mode only when Select
  // estimates the new one at least this fraction faster. In [0, 1); default 0.05
  // (fixed_k and groups for one straggler of four are often within 1% of each other,
  // and noise then flips them).
  double mode_switch_margin = 0.05;
  // Auto, pipeline jobs: the model's warm-up depths replace the schedule in force only
  // when predicted at least this fraction faster; adapted depths go back to the static
  // schedule once it is predicted within half of this of them. In [0, 1); default 0.05.
  double schedule_gain = 0.05;
  // A worker with AMP on keeps it while its full-precision equivalent compute per
  // sample (with AMP, times AMP's speedup measured when it went on) exceeds this
  // multiple of the typical full-precision worker's. >= 1; default 1.2.
  double amp_release_slowdown = 1.2;
  // Select() options (min_k comes from spec.synchronization.minK). Default SelectOptions{}
  // but learned_override_margin 0.8: with selector ML the model overrides the
  // heuristic's choice only when it is 80 points of probability surer of its own class
  // (tuned for models/selector.json on validation scenarios; bench/README.md).
  select::SelectOptions select = LoopSelectOptions();
  // Noise scale estimator options. Default NoiseScaleOptions{}.
  converge::NoiseScaleOptions noise_scale;
  // In fixed_k, groups and asgd the workers' iteration counts drift apart, and a switch
  // (a new mode, k or groups) applies at one iteration for all: the fastest wait at it
  // until the slowest catch up. While such a mode is in force, a switch to another such
  // mode is not issued when that wait is estimated (each worker's distance to the apply
  // iteration at its current pace; in fixed_k over all-reduce from when its ring arrives,
  // as children ahead of the ring wait without stopping it) above this many seconds; a
  // return to SSGD (or to one group of all) always is, and so are new batches or AMP flags
  // alone (no switch: each worker takes them up at the apply iteration on its own). >= 0;
  // default 5.
  double max_drift_wait_seconds = 5;
  // A worker leaves the reallocation request (resource_needs.h) after this many
  // consecutive rounds without the need; each time it returns after leaving, twice as
  // many (up to 16 x). >= 1; default 5.
  int resource_release_rounds = 5;
};

// OK, or InvalidArgument naming the first bad field of the loop's own settings
// ("options.decide_every_rounds: must be >= 1, got 0"). The embedded detector, AMP,
// select and noise-scale options are checked by JobControlLoop::Create, once the spec's
// settings are merged in.
[[nodiscard]] Status Validate(const LoopOptions& options);

}  // namespace star::op
