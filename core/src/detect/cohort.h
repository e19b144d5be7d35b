// Order statistics the detector's rounds are built from (detector-internal header).
#pragma once

#include <cstddef>

namespace star::detect::internal {

// Median of data[0, n); reorders data. n >= 1.
double MedianInPlace(double* data, size_t n);

// Median of sorted[0, n) (ascending), n >= 1.
double SortedMedian(const double* sorted, size_t n);

// Where the slower of two speed classes starts in `sorted` (n levels, ascending): the
// first index i >= min_fast such that sorted[i] is at least `step` times sorted[i - 1]
// (a visible gap between neighbours) and the median of sorted[i, n) is at least `ratio`
// times the median of sorted[0, i) (the classes are that far apart). 0 when there is
// none (one class).
size_t SlowClassStart(const double* sorted, size_t n, double step, double ratio, size_t min_fast);

}  // namespace star::detect::internal
