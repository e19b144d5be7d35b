#include "cohort.h"

#include <algorithm>

namespace star::detect::internal {

double MedianInPlace(double* data, size_t n) {
  const size_t mid = n / 2;
  if (n <= 32) {  // small windows: insertion sort beats selection
    for (size_t i = 1; i < n; ++i) {
      const double v = data[i];
      size_t j = i;
      for (; j > 0 && data[j - 1] > v; --j) data[j] = data[j - 1];
      data[j] = v;
    }
    return n % 2 == 1 ? data[mid] : 0.5 * (data[mid - 1] + data[mid]);
  }
  std::nth_element(data, data + mid, data + n);
  const double upper = data[mid];
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(data, data + mid);
  return 0.5 * (lower + upper);
}

double SortedMedian(const double* sorted, size_t n) {
  const size_t mid = n / 2;
  return n % 2 == 1 ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid]);
}

size_t SlowClassStart(const double* sorted, size_t n, double step, double ratio, size_t min_fast) {
  if (step <= 1 || min_fast < 1) return 0;
  for (size_t i = min_fast; i < n; ++i) {
    if (sorted[i - 1] <= 0 || sorted[i] < step * sorted[i - 1]) continue;
    if (SortedMedian(sorted + i, n - i) >= ratio * SortedMedian(sorted, i)) return i;
  }
  return 0;
}

}  // namespace star::detect::internal
