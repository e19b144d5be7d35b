// WorkerModel: how long one simulated worker's iteration takes.
//
//   compute       = batch x compute_seconds_per_sample / cpu(t) / (amp ? amp_speedup : 1)
//                   x overhead.cpu x jitter
//   communication = communication_seconds / bandwidth(t) x overhead.bandwidth x jitter
//
// cpu(t) and bandwidth(t) are the products of the fractions of the worker's episodes
// active at t, the time the iteration starts (1 when none is). `overhead` is what the
// sync mode adds (ASGD's extra CPU and bandwidth; 1 otherwise). Jitter is a log-normal
// factor of mean 1 drawn from a hash of (seed, worker, step, component): the same worker
// step gets the same factor whatever the mode or the order events run in, so runs are
// deterministic for a seed and policies see the same noise.
//
// Thread-compatible (const methods only after construction).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/scenario.h"

namespace star::sim {

// Multipliers a sync mode applies to a worker's times (ASGD's resource cost).
struct Overhead {
  double cpu = 1;        // >= 1
  double bandwidth = 1;  // >= 1
};

class WorkerModel {
 public:
  explicit WorkerModel(const Scenario& s);

  // Seconds of forward + backward for `worker`'s `step`-th iteration (its own count of
  // steps, from 0) starting at `start` seconds, on `batch` samples.
  [[nodiscard]] double Compute(int worker, int64_t step, double start, int64_t batch, bool amp,
                               const Overhead& overhead = {}) const;
  // Seconds of the worker's own communication for that iteration.
  [[nodiscard]] double Communication(int worker, int64_t step, double start,
                                     const Overhead& overhead = {}) const;

  // The fraction of compute speed (or link) kept at time t: the product over the worker's
  // active episodes; 1 when none is active.
  [[nodiscard]] double CpuFraction(int worker, double t) const;
  [[nodiscard]] double BandwidthFraction(int worker, double t) const;

  // The jitter factor of `worker`'s `step` for one `component` of its time (0 compute,
  // 1 communication; others free for callers): 1 without jitter.
  [[nodiscard]] double Jitter(int worker, int64_t step, uint64_t component) const;

 private:

  double seconds_per_sample_;
  double communication_seconds_;
  double jitter_;
  double amp_speedup_;
  uint64_t seed_;
  std::vector<std::vector<Episode>> episodes_;  // per worker, in scenario order
};

}  // namespace star::sim
