// Internal: the decisions a worker holds until their iteration, shared by the all-reduce
// engine and the parameter-server worker.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "star/core/api/decision.h"
#include "star/core/status.h"

namespace star::shim::internal {

using PendingDecisions = std::map<int64_t, api::Decision>;  // by apply_at_iteration

// Holds `d` for its iteration. The same decision again, or an older epoch for the same
// iteration, is a no-op; a newer epoch replaces the held one; a different decision under
// the same epoch is InvalidArgument.
inline Status AddPending(PendingDecisions& pending, const api::Decision& d) {
  auto it = pending.find(d.apply_at_iteration);
  if (it != pending.end()) {
    if (it->second == d || d.epoch < it->second.epoch) return Status::Ok();
    if (d.epoch == it->second.epoch) {
      return Status::InvalidArgument("decision.epoch: " + std::to_string(d.epoch) +
                                     " already names a different decision at iteration " +
                                     std::to_string(d.apply_at_iteration));
    }
  }
  pending[d.apply_at_iteration] = d;
  return Status::Ok();
}

}  // namespace star::shim::internal
