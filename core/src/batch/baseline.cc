#include "star/core/batch/baseline.h"

#include <cstddef>

namespace star::batch {

std::vector<int64_t> EqualBatches(int64_t global, int n) {
  if (n < 1) return {};
  std::vector<int64_t> b(static_cast<std::size_t>(n), global / n);
  for (int64_t i = 0; i < global % n; ++i) ++b[static_cast<std::size_t>(i)];
  return b;
}

}  // namespace star::batch
