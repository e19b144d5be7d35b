#include "local/eta.h"

#include <algorithm>
#include <cmath>

namespace star::local {

std::optional<Line> FitLine(const std::vector<std::pair<double, double>>& xy) {
  if (xy.size() < 2) return std::nullopt;
  const double m = static_cast<double>(xy.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : xy) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double var = sxx - sx * sx / m;
  if (!(var > 0)) return std::nullopt;
  const double slope = (sxy - sx * sy / m) / var;
  return Line{slope, (sy - slope * sx) / m};
}

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
  // y = log(1 - accuracy) on x = log(t); accuracies at 1 count as just below.
  std::vector<std::pair<double, double>> xy;
  for (const auto& [t, a] : points) xy.emplace_back(std::log(t), std::log(std::max(1 - a, 1e-6)));
  const std::optional<Line> line = FitLine(xy);
  if (!line) return std::nullopt;
  const double slope = line->slope, intercept = line->intercept;
  if (!(slope < 0)) return std::nullopt;  // the error is not falling: no estimate
  const double at = std::exp((std::log(1 - target) - intercept) / slope);
  const double spacing =
      (points.back().first - points.front().first) / static_cast<double>(points.size() - 1);
  if (!std::isfinite(at)) return std::nullopt;
  return std::max(at - now, spacing);
}

}  // namespace star::local
