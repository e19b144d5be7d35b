// Internal: the two equivalent event loops behind SimulateFixedK, exposed for tests.
#pragma once

#include <cstdint>
#include <vector>

#include "star/core/select/fixed_k.h"

namespace star::select::internal {

enum class FixedKLoop {
  kHeap,  // one arrival at a time from a min-heap: O(arrivals x log n); best for small k
  kScan,  // one update at a time: nth_element over the next arrivals, O(n) per update
};

// Same contract and exactly the same result as SimulateFixedK, with the loop forced.
FixedKSimulation SimulateFixedKWith(FixedKLoop loop, const std::vector<double>& t, int k,
                                    int simulated_updates, int64_t max_arrivals);

}  // namespace star::select::internal
