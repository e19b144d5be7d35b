#include "local/eta.h"

#include <algorithm>
#include <cmath>

namespace star::local {

std::optional<double> EstimateEtaSeconds(const std::vector<std::pair<double, double>>& curve,
                                         double target, double now) {
  if (!(target > 0 && target < 1)) return std::nullopt;
  std::vector<std::pair<double, double>> points;
  for (const auto& p : curve) {
    if (p.first > 0) points.push_back(p);  // log(t) needs t > 0
  }
  if (points.size() < 3) return std::nullopt;
  std::sort(points.begin(), points.end());
  if (points.size() > static_cast<size_t>(kEtaFitPoints)) {
    points.erase(points.begin(), points.end() - kEtaFitPoints);
  }
  // Least squares of y = log(1 - accuracy) on x = log(t); accuracies at 1 count as just below.
  const double m = static_cast<double>(points.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [t, a] : points) {
    const double x = std::log(t);
    const double y = std::log(std::max(1 - a, 1e-6));
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double var = sxx - sx * sx / m;
  if (!(var > 0)) return std::nullopt;
  const double slope = (sxy - sx * sy / m) / var;
  if (!(slope < 0)) return std::nullopt;  // the error is not falling: no estimate
  const double intercept = (sy - slope * sx) / m;
  const double at = std::exp((std::log(1 - target) - intercept) / slope);
  const double spacing = (points.back().first - points.front().first) / (m - 1);
  if (!std::isfinite(at)) return std::nullopt;
  return std::max(at - now, spacing);
}

}  // namespace star::local
