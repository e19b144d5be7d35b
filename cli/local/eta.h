// The progress line's estimate of the time left to the target accuracy.
#pragma once

#include <optional>
#include <utility>
#include <vector>

namespace star::local {

// Seconds from `now` until the evaluations are expected to reach `target`, from the
// accuracy curve's (job time, accuracy) points (in any order). Test error falls roughly
// exponentially near the end of training, so the estimate fits log(1 - accuracy) as a
// line in time over the newest kEtaFitPoints evaluations (least squares) and solves for
// the target. It is never below one evaluation interval (the mean spacing of those
// points): a target not yet seen is at least one more evaluation away.
// nullopt ("unknown") with fewer than 3 points, a target outside (0, 1), or no falling
// error trend.
[[nodiscard]] std::optional<double> EstimateEtaSeconds(
    const std::vector<std::pair<double, double>>& curve, double target, double now);

// Evaluations the fit covers.
inline constexpr int kEtaFitPoints = 6;

}  // namespace star::local
