// NoiseScaleEstimator: the online estimate of the simple noise scale phi.
//
// Every iteration each worker has its local gradient (batch b_small) and, after the
// all-reduce, the aggregated gradient (batch b_big > b_small). Their squared L2 norms
// give unbiased estimates (ALGORITHMS.md section 2):
//     |G|^2     ~ (b_big |g_big|^2 - b_small |g_small|^2) / (b_big - b_small)
//     tr(Sigma) ~ (|g_small|^2 - |g_big|^2) / (1/b_small - 1/b_big)
// Single estimates are very noisy (either can be negative), so the estimator keeps an
// exponential moving average of each and reports phi = EMA(tr Sigma) / EMA(|G|^2):
// smoothing numerator and denominator separately keeps the ratio from blowing up when
// one |G|^2 sample is near zero.
//
// Not thread-safe; one instance per job. Copyable.
#pragma once

#include <cstdint>
#include <optional>

#include "star/core/status.h"

namespace star::converge {

struct NoiseScaleOptions {
  // Weight of the newest observation in both moving averages, in (0, 1]. Default 0.05:
  // an effective memory of about 1/alpha = 20 observations, which tracks phi as it
  // drifts during training while averaging out per-iteration noise.
  double alpha = 0.05;
  // NoiseScale() stays nullopt until this many observations were accepted, >= 1.
  // Default 10.
  int64_t min_observations = 10;
};

class NoiseScaleEstimator {
 public:
  // Default options (see NoiseScaleOptions).
  NoiseScaleEstimator() = default;
  // Fails with InvalidArgument naming the option ("alpha: must be in (0, 1], got 0").
  [[nodiscard]] static StatusOr<NoiseScaleEstimator> Create(const NoiseScaleOptions& options);

  // Adds one observation: the squared norm g_small_sq of a gradient over b_small samples
  // and g_big_sq of the aggregated gradient over b_big samples. Callers with n workers
  // may call once per worker (same g_big_sq) or once with the workers' mean
  // |g_small|^2; both are unbiased.
  // Errors (InvalidArgument, the estimator is left unchanged): non-finite values,
  // b_small <= 0, b_big <= b_small, a negative squared norm. O(1).
  Status Observe(double b_small, double g_small_sq, double b_big, double g_big_sq);

  // phi = EMA(tr Sigma) / EMA(|G|^2), clamped at 0 from below (a negative tr(Sigma)
  // estimate means the noise is too small to measure). nullopt until min_observations
  // observations were accepted, or while the |G|^2 average is not positive. O(1).
  [[nodiscard]] std::optional<double> NoiseScale() const;

  // The bias-corrected moving averages (meaningful once observations() > 0).
  [[nodiscard]] double GradientSqNorm() const;  // |G|^2
  [[nodiscard]] double TraceSigma() const;      // tr(Sigma)
  [[nodiscard]] int64_t observations() const { return observations_; }

 private:
  explicit NoiseScaleEstimator(const NoiseScaleOptions& options) : options_(options) {}

  NoiseScaleOptions options_;
  double ema_g_sq_ = 0;       // EMA of |G|^2 estimates, started at 0
  double ema_trace_ = 0;      // EMA of tr(Sigma) estimates, started at 0
  double decay_product_ = 1;  // (1 - alpha)^observations: the start-at-0 bias
  int64_t observations_ = 0;
};

}  // namespace star::converge
