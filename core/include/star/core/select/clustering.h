// Grouping workers by iteration time for the dynamic-groups mode.
#pragma once

#include <vector>

namespace star::select {

// Agglomerative complete-linkage clustering of the workers by iteration time t_i.
// A cluster's spread is (slowest - fastest) time in it. Starting from singletons, the
// two adjacent clusters (in time order) whose union has the smallest spread are merged,
// as long as that spread is <= max(threshold_seconds, threshold_relative x fastest time
// of the union); a pair over its threshold is never merged. Equal times always end in one
// cluster. Adjacent pairs suffice: in one dimension the union of two non-adjacent
// clusters spreads wider than either adjacent union between them.
//
// Returns the clusters as lists of worker ids (indices into t): clusters ordered by their
// fastest time, ids inside a cluster ascending. Every id appears exactly once.
// Requires t non-empty, finite; thresholds >= 0. Deterministic (ties broken by time
// order). O(n log n).
[[nodiscard]] std::vector<std::vector<int>> ClusterByTime(const std::vector<double>& t,
                                                          double threshold_seconds,
                                                          double threshold_relative);

}  // namespace star::select
