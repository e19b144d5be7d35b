#include "star/core/converge/noise_scale_estimator.h"

#include <charconv>
#include <cmath>
#include <string>

namespace star::converge {
namespace {

std::string Num(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

}  // namespace

StatusOr<NoiseScaleEstimator> NoiseScaleEstimator::Create(const NoiseScaleOptions& options) {
  if (!(options.alpha > 0 && options.alpha <= 1)) {
    return Status::InvalidArgument("alpha: must be in (0, 1], got " + Num(options.alpha));
  }
  if (options.min_observations < 1) {
    return Status::InvalidArgument("min_observations: must be >= 1, got " +
                                   std::to_string(options.min_observations));
  }
  return NoiseScaleEstimator(options);
}

Status NoiseScaleEstimator::Observe(double b_small, double g_small_sq, double b_big,
                                    double g_big_sq) {
  struct Field {
    const char* name;
    double value;
  };
  for (const Field& f : {Field{"b_small", b_small}, Field{"g_small_sq", g_small_sq},
                         Field{"b_big", b_big}, Field{"g_big_sq", g_big_sq}}) {
    if (!std::isfinite(f.value)) {
      return Status::InvalidArgument(std::string(f.name) + ": must be a finite number");
    }
  }
  if (b_small <= 0) return Status::InvalidArgument("b_small: must be > 0, got " + Num(b_small));
  if (b_big <= b_small) {
    return Status::InvalidArgument("b_big: must be > b_small (" + Num(b_small) + "), got " +
                                   Num(b_big));
  }
  if (g_small_sq < 0) {
    return Status::InvalidArgument("g_small_sq: must be >= 0, got " + Num(g_small_sq));
  }
  if (g_big_sq < 0) return Status::InvalidArgument("g_big_sq: must be >= 0, got " + Num(g_big_sq));

  const double g_sq = (b_big * g_big_sq - b_small * g_small_sq) / (b_big - b_small);
  const double trace = (g_small_sq - g_big_sq) / (1.0 / b_small - 1.0 / b_big);
  const double a = options_.alpha;
  ema_g_sq_ = (1 - a) * ema_g_sq_ + a * g_sq;
  ema_trace_ = (1 - a) * ema_trace_ + a * trace;
  decay_product_ *= (1 - a);
  ++observations_;
  return Status::Ok();
}

std::optional<double> NoiseScaleEstimator::NoiseScale() const {
  if (observations_ < options_.min_observations) return std::nullopt;
  // The bias corrections of numerator and denominator are equal and cancel.
  if (!(ema_g_sq_ > 0)) return std::nullopt;
  const double phi = ema_trace_ / ema_g_sq_;
  if (!std::isfinite(phi)) return std::nullopt;
  return phi > 0 ? phi : 0.0;
}

double NoiseScaleEstimator::GradientSqNorm() const {
  const double w = 1 - decay_product_;
  return w > 0 ? ema_g_sq_ / w : 0.0;
}

double NoiseScaleEstimator::TraceSigma() const {
  const double w = 1 - decay_product_;
  return w > 0 ? ema_trace_ / w : 0.0;
}

}  // namespace star::converge
