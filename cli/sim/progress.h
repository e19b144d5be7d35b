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
// the penalty; Scenario::staleness_penalty). A fresh gradient (s = 0) counts in full.
//
// Two optional effects of how the shim (star/shim/sync_engine.h) applies a switch, off
// by default (ProgressModel):
// - Momentum: the shim zeroes its momentum buffers at every applied decision, so the
//   t-th update of a model after a switch (t = 0, 1, ...; the job's start counts as one)
//   is worth (1 - momentum^(t + 1)) of its worth: SGD with momentum m at steady state
//   moves 1 / (1 - m) times its gradient per update, and that speed is regained
//   geometrically. Over a long stretch a switch costs about m / (1 - m) updates.
// - Group replicas: in mode groups every group trains its own copy of the model; the
//   next switch averages the copies over the workers (each group's copy weighs its
//   member count). The target is judged on rank 0's copy (the model a job checkpoints
//   and the testbed evaluates). Without replicas, every group's updates advance one
//   model, as STAR's cost model T_dyn assumes.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace star::sim {

struct ProgressModel {
  double noise_scale = 0;
  double min_updates = 1;
  double staleness_penalty = 0;
  double momentum = 0;          // in [0, 1); 0: switches cost nothing
  bool group_replicas = false;  // mode groups trains one copy per group
};

class Progress {
 public:
  explicit Progress(const ProgressModel& m);
  Progress(double noise_scale, double min_updates, double staleness_penalty)
      : Progress(ProgressModel{noise_scale, min_updates, staleness_penalty}) {}

  // The samples a gradient of `samples` counts for when it is `staleness` updates old.
  [[nodiscard]] double Discounted(int64_t samples, int64_t staleness) const {
    return static_cast<double>(samples) / (1 + m_.staleness_penalty * static_cast<double>(staleness));
  }
  // What an update over `effective_samples` (already discounted) is worth.
  [[nodiscard]] double Worth(double effective_samples) const {
    return effective_samples > 0 ? 1 / (1 + m_.noise_scale / effective_samples) : 0;
  }

  // A decision was applied: the momentum restarts, copies of the model are averaged
  // over the workers, and, with group replicas, `groups` (mode groups' partition of the
  // ranks; empty for any other mode) each train their own copy from here.
  void Switch(std::span<const std::vector<int>> groups);

  // Records one model update at `time` over `effective_samples` (plus any carry) by the
  // copy of group `group` of the last Switch's partition (ignored while there is one
  // model). The first update that brings rank 0's copy to min_updates sets tta().
  void Update(double time, double effective_samples, size_t group = 0);
  // Samples of gradients that will be added to the next update (a fixed-k switch's
  // carry), already discounted.
  void Carry(double effective_samples) { carry_ += effective_samples; }

  // Updates so far (every copy's): the parameter version.
  [[nodiscard]] int64_t updates() const { return updates_; }
  // What rank 0's copy is worth.
  [[nodiscard]] double worth() const { return copies_[rank0_].worth; }
  [[nodiscard]] bool reached() const { return tta_.has_value(); }
  [[nodiscard]] std::optional<double> tta() const { return tta_; }

 private:
  struct Copy {
    double worth = 0;
    double workers = 1;         // the weight of this copy in the average
    int64_t since_switch = 0;   // updates since the momentum restarted
  };

  ProgressModel m_;
  std::vector<Copy> copies_;
  size_t rank0_ = 0;  // the copy rank 0 trains
  double carry_ = 0;
  int64_t updates_ = 0;
  std::optional<double> tta_;
};

}  // namespace star::sim
