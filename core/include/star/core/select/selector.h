// The synchronization-mode choice (ALGORITHMS.md section 3) and the `star select` codec.
//
// Select() scores SSGD, fixed-k at STAR's heuristic k*, dynamic groups and (where
// allowed) ASGD with the cost models in cost_model.h / fixed_k.h, and returns the one
// with the fewest estimated seconds per unit of progress, preferring SSGD when it is
// within a small margin of the best and no worse than the k* candidate.
//
// Contract of `star select` (docs/ARCHITECTURE.md):
//   input  {"architecture":"AllReduce|ParameterServer","batch_per_worker":B,
//           "noise_scale":PHI,"iteration_seconds":[t_0,...]}
//   output {"mode":"ssgd|fixed_k|groups|asgd","k":K,"groups":[[...],...],
//           "estimated_seconds_per_progress":X}
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/types.h"
#include "star/core/select/clustering.h"
#include "star/core/select/cost_model.h"
#include "star/core/select/fixed_k.h"
#include "star/core/status.h"

namespace star::select {

struct SelectionInput {
  api::Architecture architecture = api::Architecture::kAllReduce;
  double batch_per_worker = 0;            // B > 0 (samples per worker per iteration)
  double noise_scale = 0;                 // phi >= 0
  std::vector<double> iteration_seconds;  // t_i per worker id, each > 0, size >= 1
};

// Largest number of workers Select() accepts.
inline constexpr int64_t kMaxWorkers = 1 << 20;

struct SelectOptions {
  // Updates simulated for the fixed-k candidate (STAR used 1000). The simulation runs
  // max(simulated_updates, kSteadyStateRounds x ceil(n / k)) updates, so that small k
  // on many workers still covers several rounds of every worker, and stops early once
  // max_simulated_gradients gradients were simulated. Default 1000, >= 1.
  int simulated_updates = 1000;
  // Cap on simulated gradient arrivals, so that large jobs stay fast: at n = 4096 and k
  // near n the default covers about 16 updates (every one of them a full round of
  // every worker; the interval settles within a few). Default 65536, >= 1.
  int64_t max_simulated_gradients = 65536;
  // Jobs with more workers than this use FixedKMeanField() instead of the simulation
  // (which would need n x many rounds of arrivals to settle). Default 256, >= 1.
  int simulate_up_to_workers = 256;
  // Dynamic groups: a group's spread (slowest - fastest time) stays within
  // max(group_threshold_seconds, group_threshold_relative x its fastest time).
  // Defaults 0.05 s (STAR's 50 ms) and 0.10; both >= 0.
  double group_threshold_seconds = 0.05;
  double group_threshold_relative = 0.10;
  // Whether dynamic groups are a candidate at all. Default true.
  bool consider_groups = true;
  // ASGD's resource-cost multiplier (see AsgdSecondsPerProgress). Default 1.25, >= 1.
  double asgd_resource_penalty = 1.25;
  // ASGD needs a parameter server: for AllReduce jobs it is a candidate only when this
  // is true. Default false.
  bool allow_asgd_with_allreduce = false;
  // Switching out of SSGD has a cost: SSGD is kept while its estimate is within this
  // fraction of the best candidate's (and not above the k* candidate's). Default 0.05,
  // >= 0.
  double ssgd_preference_margin = 0.05;
  // Fewest gradients an update may sum (TrainingJob synchronization.minK): the fixed-k
  // candidate uses max(k*, min_k); groups smaller than min_k rule out the groups
  // candidate; ASGD is a candidate only when min_k <= 1. Default 1, >= 1.
  int min_k = 1;
  // The learned selector (learned.h, SelectLearned) overrides the heuristic's choice only
  // when the model's best allowed class outscores the heuristic's class by at least this
  // much (scores of a multi:softprob model are probabilities, so 0.3 means 30 points of
  // probability); 0 always takes the model's choice. Default 0, finite and >= 0.
  double learned_override_margin = 0;
  // ... and only when the cost model's estimate for the model's choice is at most this
  // multiple of the heuristic's estimate for its own. Default infinity (no check), >= 1.
  double learned_max_estimate_ratio = std::numeric_limits<double>::infinity();
};

// Rounds of every worker the fixed-k simulation covers at least (see simulated_updates).
inline constexpr int kSteadyStateRounds = 16;

// One evaluated option, for explanation.
struct Candidate {
  api::SyncMode mode = api::SyncMode::kSsgd;
  int k = 0;                              // as in Selection
  std::vector<std::vector<int>> groups;   // as in Selection
  double update_interval_seconds = 0;     // mean time between model updates
  double effective_batch = 0;             // mean samples summed per update
  double estimated_seconds_per_progress = 0;
};

struct Selection {
  api::SyncMode mode = api::SyncMode::kSsgd;
  // Gradients per update: n for ssgd, the chosen k for fixed_k, n for groups (each
  // group sums all of its members), 1 for asgd.
  int k = 0;
  // Worker ids. groups mode: the groups, fastest first, ids ascending inside a group;
  // any other mode: one group of all workers, ids ascending.
  std::vector<std::vector<int>> groups;
  // The chosen candidate's update interval x updates factor (TTA per unit of progress).
  double estimated_seconds_per_progress = 0;
  // Every evaluated option, in the order ssgd, fixed_k, groups, asgd (those evaluated).
  std::vector<Candidate> candidates;
};

// Checks the input; errors name the field ("iteration_seconds[2]: must be > 0, got -1").
[[nodiscard]] Status Validate(const SelectionInput& input);
// Checks the options; errors name the field ("min_k: must be >= 1, got 0").
[[nodiscard]] Status Validate(const SelectOptions& options);

// Decodes the `star select` input; unknown fields are rejected and errors name the
// field ("architecture: must be one of AllReduce, ParameterServer, got \"Ring\"").
// The result passes Validate().
[[nodiscard]] StatusOr<SelectionInput> SelectionInputFromJson(const nlohmann::json& j);
[[nodiscard]] nlohmann::json ToJson(const SelectionInput& input);

// {"mode","k","groups","estimated_seconds_per_progress"}, plus "candidates" (each with
// mode, k, groups, update_interval_seconds, effective_batch,
// estimated_seconds_per_progress) when include_candidates is true.
[[nodiscard]] nlohmann::json ToJson(const Candidate& candidate);
[[nodiscard]] nlohmann::json ToJson(const Selection& selection, bool include_candidates = false);

// The heuristic choice. Candidates:
//  - ssgd: SsgdSecondsPerProgress;
//  - fixed_k at k = max(StarKStar(...), min_k) when that is < n: SimulateFixedK (or
//    FixedKMeanField above simulate_up_to_workers) and FixedKSecondsPerProgress;
//  - groups (if consider_groups) when ClusterByTime gives more than one group, all of at
//    least min_k workers: GroupsSecondsPerProgress;
//  - asgd when the architecture is ParameterServer (or allow_asgd_with_allreduce),
//    n > 1 and min_k <= 1: AsgdSecondsPerProgress.
// Choice: SSGD if its estimate is <= the k* candidate's (the fixed-k candidate's, or
// SSGD's own when there is none) and <= (1 + ssgd_preference_margin) x the best
// estimate; otherwise the candidate with the lowest estimate (earliest in the order
// above on ties). Hence the chosen estimate is never above SSGD's nor the k*
// candidate's.
// Errors: InvalidArgument from Validate(input) / Validate(options).
// Deterministic. O(n log n + simulated updates x k x log n) time, O(n) memory.
[[nodiscard]] StatusOr<Selection> Select(const SelectionInput& input,
                                         const SelectOptions& options = {});

// The learned selector (STAR's ML choice) is in learned.h.

}  // namespace star::select
