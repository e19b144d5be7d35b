// Internals of the batch planner exposed to its tests only.
#pragma once

#include "star/core/batch/planner.h"

namespace star::batch::internal {

enum class Search {
  kAuto,       // bracket + candidate selection, bisection only as a fallback
  kBisection,  // always bisect over the finishing time (the fallback path)
};

// PlanBatches with the search path chosen; both paths must give identical plans.
[[nodiscard]] StatusOr<BatchPlan> PlanBatchesWith(const PlanInput& in, Search search);

}  // namespace star::batch::internal
