// Internal: facts about the loop's per-worker iteration times.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace star::op {

// Every worker has a finite, positive time: the times can drive a decision.
inline bool AllMeasured(const std::vector<double>& times) {
  return std::all_of(times.begin(), times.end(),
                     [](double x) { return x > 0 && std::isfinite(x); });
}

}  // namespace star::op
