// Internal: facts about the loop's per-worker iteration times.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace star::op {

// Every worker has a finite, positive time: the times can drive a decision.
inline bool AllMeasured(const std::vector<double>& times) {
  return std::all_of(times.begin(), times.end(),
                     [](double x) { return x > 0 && std::isfinite(x); });
}

// a + b for b >= 0, at most INT64_MAX (no overflow).
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<int64_t>::max() : sum;
}

// ceil(x) as an int64_t for x >= 0, at most INT64_MAX (a double cast past it is UB).
inline int64_t SaturatingCeil(double x) {
  constexpr double kLimit = 9.2e18;  // below INT64_MAX, and a double
  return x >= kLimit ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(std::ceil(x));
}

}  // namespace star::op
