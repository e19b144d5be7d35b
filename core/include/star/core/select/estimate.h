// The cost model's estimate for one given synchronization of a job, scored as Select()
// scores its candidates (selector.h): for comparing the setting in force with another.
#pragma once

#include <vector>

#include "star/core/api/types.h"
#include "star/core/select/fixed_k.h"
#include "star/core/select/selector.h"
#include "star/core/status.h"

namespace star::select {

// Fixed-k at `k` as Select() simulates it: SimulateFixedK over
// max(simulated_updates, kSteadyStateRounds x ceil(n / k)) updates (at most
// max_simulated_gradients arrivals) up to simulate_up_to_workers workers, FixedKMeanField
// above. Requires t as in cost_model.h and 1 <= k <= t.size().
[[nodiscard]] FixedKSimulation SimulateFixedKAsSelect(const std::vector<double>& t, int k,
                                                      const SelectOptions& options);

// Seconds per unit of progress of `mode` on `input`: ssgd (SsgdSecondsPerProgress),
// fixed_k at `k` (SimulateFixedKAsSelect, FixedKSecondsPerProgress; the order of the
// workers does not enter), groups over `groups` (GroupsSecondsPerProgress), asgd
// (AsgdSecondsPerProgress with options.asgd_resource_penalty). `k` is read for fixed_k
// only, `groups` for groups only.
// Errors: InvalidArgument from Validate(input) / Validate(options); "k: must be in
// [1, n]"; "groups: ..." when a group is empty or names no worker of the job.
[[nodiscard]] StatusOr<double> EstimateSecondsPerProgress(
    const SelectionInput& input, api::SyncMode mode, int k,
    const std::vector<std::vector<int>>& groups, const SelectOptions& options = {});

}  // namespace star::select
