// Internal: which synchronization settings let workers' iteration counts drift apart.
#pragma once

#include <cstddef>

#include "star/core/api/types.h"

namespace star::op {

// Whether workers' iteration counts drift apart under a mode: not in SSGD, nor in
// fixed_k waiting for every worker (k = n) or in one group of all: those keep every
// worker in step as SSGD does.
inline bool Drifts(api::SyncMode mode, int k, size_t groups, int n) {
  if (mode == api::SyncMode::kFixedK) return k < n;
  if (mode == api::SyncMode::kGroups) return groups > 1;
  return mode != api::SyncMode::kSsgd;
}

}  // namespace star::op
