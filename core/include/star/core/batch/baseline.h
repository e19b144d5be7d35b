// The baseline batch split: what every worker trains on before any decision changes it.
#pragma once

#include <cstdint>
#include <vector>

namespace star::batch {

// The global batch split evenly over `n` workers, the remainder going one sample each
// to the lowest ranks: EqualBatches(10, 4) = {3, 3, 2, 2}. The result sums to `global`.
// n < 1 gives an empty vector; global < n gives zeros for the highest ranks.
[[nodiscard]] std::vector<int64_t> EqualBatches(int64_t global, int n);

}  // namespace star::batch
