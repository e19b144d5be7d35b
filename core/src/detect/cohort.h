// Order statistics the detector's rounds are built from (detector-internal header).
#pragma once

#include <cstddef>

namespace star::detect::internal {

// Median of data[0, n); reorders data. n >= 1.
double MedianInPlace(double* data, size_t n);

// Median of sorted[0, n) (ascending), n >= 1.
double SortedMedian(const double* sorted, size_t n);

// Where the slower of two speed classes starts in `sorted` (n levels, ascending): the
// first index i >= min_fast whose level is at least `gap` times the one before it, so
// the faster class sorted[0, i) holds at least min_fast workers. 0 when there is no such
// gap (one class), when n < min_fast + 1, or when gap <= 1.
size_t SlowClassStart(const double* sorted, size_t n, double gap, size_t min_fast);

}  // namespace star::detect::internal
