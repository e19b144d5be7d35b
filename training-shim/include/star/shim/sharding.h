// Sharding: which parameter server holds which parameter tensor (ALGORITHMS.md section 4:
// "shard parameters largest-first onto the least-loaded PS").
//
// The model's parameters are a list of tensors, flattened in list order into one float
// buffer. A plan assigns every tensor to exactly one of P servers. Pure and deterministic:
// every rank computes the same plan from the same sizes.
#pragma once

#include <cstddef>
#include <vector>

#include "star/core/status.h"

namespace star::shim {

struct ShardPlan {
  // Per tensor (input order): the index of the server holding it, in [0, P).
  std::vector<int> owner;
  // Per server: the tensors it holds, ascending (so a shard is the concatenation of its
  // tensors in model order).
  std::vector<std::vector<size_t>> tensors;
  // Per server: floats held (the sum of its tensors' sizes); may be 0 when P exceeds
  // the number of tensors.
  std::vector<size_t> load;
  // Per tensor: its size (input), and the offset of its first float in the flat buffer.
  std::vector<size_t> size;
  std::vector<size_t> offset;
  size_t total = 0;  // floats in the flat buffer
};

// Largest-first greedy (LPT): tensors in order of decreasing size (ties: lower index
// first) each go to the server with the least load so far (ties: lower server index).
// Every tensor is assigned exactly once; the largest load is at most the smallest load
// plus the largest tensor. Errors: InvalidArgument if num_servers < 1, tensor_sizes is
// empty, or a size is 0 (naming the index). O(T log T + T P).
[[nodiscard]] StatusOr<ShardPlan> PlanShards(const std::vector<size_t>& tensor_sizes,
                                             int num_servers);

}  // namespace star::shim
