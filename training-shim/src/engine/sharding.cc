#include "star/shim/sharding.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace star::shim {

StatusOr<ShardPlan> PlanShards(const std::vector<size_t>& tensor_sizes, int num_servers) {
  if (num_servers < 1) {
    return Status::InvalidArgument("num_servers: must be >= 1, got " + std::to_string(num_servers));
  }
  if (tensor_sizes.empty()) return Status::InvalidArgument("tensor_sizes: must not be empty");
  ShardPlan plan;
  plan.size = tensor_sizes;
  plan.offset.resize(tensor_sizes.size());
  for (size_t t = 0; t < tensor_sizes.size(); ++t) {
    if (tensor_sizes[t] == 0) {
      return Status::InvalidArgument("tensor_sizes[" + std::to_string(t) + "]: must be >= 1");
    }
    plan.offset[t] = plan.total;
    plan.total += tensor_sizes[t];
  }
  std::vector<size_t> order(tensor_sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return tensor_sizes[a] > tensor_sizes[b]; });
  const size_t p = static_cast<size_t>(num_servers);
  plan.owner.assign(tensor_sizes.size(), 0);
  plan.tensors.assign(p, {});
  plan.load.assign(p, 0);
  for (size_t t : order) {
    const size_t s = static_cast<size_t>(
        std::min_element(plan.load.begin(), plan.load.end()) - plan.load.begin());
    plan.owner[t] = static_cast<int>(s);
    plan.load[s] += tensor_sizes[t];
    plan.tensors[s].push_back(t);
  }
  for (auto& ts : plan.tensors) std::sort(ts.begin(), ts.end());
  return plan;
}

}  // namespace star::shim
