#include "local/eta.h"

#include <algorithm>
#include <cmath>

namespace star::local {

std::optional<double> EstimateEtaSeconds(const std::vector<std::pair<double, double>>& curve,
                                         double target, double now) {
  if (!(target > 0 && target < 1) || curve.size() < 3) return std::nullopt;
  std::vector<std::pair<double, double>> points = curve;
  std::sort(points.begin(), points.end());
  if (points.size() > static_cast<size_t>(kEtaFitPoints)) {
    points.erase(points.begin(), points.end() - kEtaFitPoints);
  }
  // Least squares of y = log(1 - accuracy) on t; accuracies at 1 count as just below.
  const double m = static_cast<double>(points.size());
  double st = 0, sy = 0, stt = 0, sty = 0;
  for (const auto& [t, a] : points) {
    const double y = std::log(std::max(1 - a, 1e-6));
    st += t;
    sy += y;
    stt += t * t;
    sty += t * y;
  }
  const double var = stt - st * st / m;
  if (!(var > 0)) return std::nullopt;
  const double slope = (sty - st * sy / m) / var;
  if (!(slope < 0)) return std::nullopt;  // the error is not falling: no estimate
  const double intercept = (sy - slope * st) / m;
  const double at = (std::log(1 - target) - intercept) / slope;
  const double spacing = (points.back().first - points.front().first) / (m - 1);
  return std::max(at - now, spacing);
}

}  // namespace star::local
