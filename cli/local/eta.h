// The progress line's estimate of the time left to the target accuracy.
#pragma once

#include <optional>
#include <utility>
#include <vector>

namespace star::local {

// Seconds from `now` until the evaluations are expected to reach `target`, from the
// accuracy curve's (job time, accuracy) points (in any order). Test error falls roughly
// as a power of training time (error ~ c t^-b), so the estimate fits log(1 - accuracy)
// as a line in log(job time) over the newest kEtaFitPoints evaluations (least squares)
// and solves for the target. Replayed on testbed runs against an exponential fit over
// the newest 6 (which under-estimated most of the time, often down to its floor), its
// median error fell from 61% to 39% of the time left on 58 held-out runs, though within
// 10 s of the target it was 2.8 s against 2.2 s (bench/eta/results.md). It is never
// below one evaluation interval
// (the mean spacing of those points): a target not yet seen is at least one more
// evaluation away. nullopt ("unknown") with fewer than 3 points at t > 0, a target
// outside (0, 1), or no falling error trend.
[[nodiscard]] std::optional<double> EstimateEtaSeconds(
    const std::vector<std::pair<double, double>>& curve, double target, double now);

// The least-squares line y = slope x + intercept through (x, y) points; nullopt with
// fewer than 2 points or no spread in x.
struct Line {
  double slope = 0;
  double intercept = 0;
};
[[nodiscard]] std::optional<Line> FitLine(const std::vector<std::pair<double, double>>& xy);

// Evaluations the fit covers.
inline constexpr int kEtaFitPoints = 64;

}  // namespace star::local
