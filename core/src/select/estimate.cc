#include "star/core/select/estimate.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "star/core/select/cost_model.h"

namespace star::select {

FixedKSimulation SimulateFixedKAsSelect(const std::vector<double>& t, int k,
                                        const SelectOptions& options) {
  const int n = static_cast<int>(t.size());
  if (n > options.simulate_up_to_workers) return FixedKMeanField(t, k);
  const int64_t rounds = kSteadyStateRounds * ((static_cast<int64_t>(n) + k - 1) / k);
  const int updates = static_cast<int>(
      std::min<int64_t>(std::max<int64_t>(options.simulated_updates, rounds),
                        std::numeric_limits<int>::max()));
  return SimulateFixedK(t, k, updates, options.max_simulated_gradients);
}

namespace {

Status CheckGroups(const std::vector<std::vector<int>>& groups, int n) {
  if (groups.empty()) return Status::InvalidArgument("groups: must not be empty");
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string field = "groups[" + std::to_string(g) + "]";
    if (groups[g].empty()) return Status::InvalidArgument(field + ": must not be empty");
    for (int id : groups[g]) {
      if (id < 0 || id >= n) {
        return Status::InvalidArgument(field + ": worker " + std::to_string(id) +
                                       " is not in [0, " + std::to_string(n) + ")");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<double> EstimateSecondsPerProgress(const SelectionInput& input, api::SyncMode mode,
                                            int k, const std::vector<std::vector<int>>& groups,
                                            const SelectOptions& options) {
  STAR_RETURN_IF_ERROR(Validate(input));
  STAR_RETURN_IF_ERROR(Validate(options));
  const std::vector<double>& t = input.iteration_seconds;
  const int n = static_cast<int>(t.size());
  const double b = input.batch_per_worker, phi = input.noise_scale;
  switch (mode) {
    case api::SyncMode::kSsgd:
      return SsgdSecondsPerProgress(t, b, phi);
    case api::SyncMode::kFixedK:
      if (k < 1 || k > n) {
        return Status::InvalidArgument("k: must be in [1, " + std::to_string(n) + "], got " +
                                       std::to_string(k));
      }
      return FixedKSecondsPerProgress(SimulateFixedKAsSelect(t, k, options), b, phi);
    case api::SyncMode::kGroups:
      STAR_RETURN_IF_ERROR(CheckGroups(groups, n));
      return GroupsSecondsPerProgress(t, groups, b, phi);
    case api::SyncMode::kAsgd:
      return AsgdSecondsPerProgress(t, b, phi, options.asgd_resource_penalty);
  }
  return Status::InvalidArgument("mode: unknown value " + std::to_string(static_cast<int>(mode)));
}

}  // namespace star::select
