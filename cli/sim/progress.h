// Progress: model updates and what they are worth toward the target (ALGORITHMS.md
// section 2).
//
// An update that sums gradients over an effective batch b is worth 1 / (1 + phi / b) of
// an update at infinite batch (I(b) = 1 + phi / b updates at batch b do the work of one
// at infinite batch). The target is `min_updates` of those.
//
// Staleness: a gradient computed on parameters that are s updates older than the ones it
// is applied to (an ASGD gradient while others updated, a fixed-k child's or late
// gradient added to a later round) contributes its samples to b discounted to
//   samples / (1 + staleness_penalty x s)
// (the staleness-aware learning-rate rule lr / (1 + s) of asynchronous SGD, softened by
// the penalty; Scenario::staleness_penalty, default kDefaultStalenessPenalty, not yet
// calibrated against the testbed). A fresh gradient (s = 0) counts in full. Synchronous
// groups (mode groups) are not discounted, as in STAR's cost model T_dyn.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>

namespace star::sim {

class Progress {
 public:
  Progress(double noise_scale, double min_updates, double staleness_penalty)
      : noise_scale_(noise_scale), min_updates_(min_updates), penalty_(staleness_penalty) {}

  // The samples a gradient of `samples` counts for when it is `staleness` updates old.
  [[nodiscard]] double Discounted(int64_t samples, int64_t staleness) const {
    return static_cast<double>(samples) / (1 + penalty_ * static_cast<double>(staleness));
  }
  // What an update over `effective_samples` (already discounted) is worth.
  [[nodiscard]] double Worth(double effective_samples) const {
    return effective_samples > 0 ? 1 / (1 + noise_scale_ / effective_samples) : 0;
  }

  // Records one model update at `time` over `effective_samples` (plus any carry). The
  // first update that brings the total worth to min_updates sets tta().
  void Update(double time, double effective_samples);
  // Samples of gradients that will be added to the next update (a fixed-k switch's
  // carry), already discounted.
  void Carry(double effective_samples) { carry_ += effective_samples; }

  // Updates so far: the parameter version.
  [[nodiscard]] int64_t updates() const { return updates_; }
  [[nodiscard]] double worth() const { return worth_; }
  [[nodiscard]] bool reached() const { return tta_.has_value(); }
  [[nodiscard]] std::optional<double> tta() const { return tta_; }

 private:
  double noise_scale_;
  double min_updates_;
  double penalty_;
  double carry_ = 0;
  int64_t updates_ = 0;
  double worth_ = 0;
  std::optional<double> tta_;
};

}  // namespace star::sim
