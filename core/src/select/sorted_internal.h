// Internal: building blocks on times already sorted, so Select() sorts once.
#pragma once

#include <vector>

namespace star::select::internal {

// Worker ids ordered by time (stable: ties by id), and the times in that order.
struct SortedTimes {
  std::vector<int> order;
  std::vector<double> seconds;
};
SortedTimes SortTimes(const std::vector<double>& t);

// StarKStar on ascending times.
int StarKStarSorted(const std::vector<double>& sorted, double batch_per_worker,
                    double noise_scale);

// ClusterByTime on a SortTimes() result.
std::vector<std::vector<int>> ClusterSorted(const SortedTimes& s, double threshold_seconds,
                                            double threshold_relative);

}  // namespace star::select::internal
