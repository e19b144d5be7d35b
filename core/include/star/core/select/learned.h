// The learned mode selector (STAR's ML choice, ALGORITHMS.md section 3): a model maps
// features the control loop measures online to a score per selector class (a mode, and
// for fixed-k a fraction of the workers); SelectLearned() turns any model output into a
// valid Selection, so a learned selector never returns an invalid one.
//
// Core holds only the feature definition, the class layout and the validation: the
// model itself (an XGBoost booster, say) lives in an adapter outside core that
// implements LearnedSelector.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "star/core/select/selector.h"
#include "star/core/status.h"

namespace star::select {

// What the loop measures about the job when it selects, beyond SelectionInput.
struct SelectorContext {
  // Share of a worker's iteration time spent communicating (its own communication over
  // compute + communication, averaged over the workers), in [0, 1]. Default 0.
  double communication_share = 0;
};

// The features, in model-input order (FeatureVector). Times are ratios, so the features
// do not depend on the model's absolute speed.
struct SelectorFeatures {
  double workers = 0;               // n
  double parameter_server = 0;      // 1 for ParameterServer, 0 for AllReduce
  double straggling_degree = 0;     // (t_max - t_avg) / t_avg
  double straggler_fraction = 0;    // share of workers with (t_i - t_min) / t_min > 0.2
  double slowdown_p50 = 0;          // median t / t_min
  double slowdown_p90 = 0;          // 90th percentile t / t_min (nearest rank)
  double slowdown_max = 0;          // t_max / t_min
  double communication_share = 0;   // SelectorContext::communication_share
  double noise_per_global_batch = 0;  // phi / (n B)
  double noise_per_local_batch = 0;   // phi / B
  double min_k_fraction = 0;        // SelectOptions::min_k / n
};

// Number of features, the length of FeatureVector().
inline constexpr std::size_t kSelectorFeatureCount = 11;

// The selector classes (the model's labels), in score order:
//   0 ssgd, 1 asgd, 2 groups, 3 + j fixed_k at k = round(kFixedKFractions[j] x n).
inline constexpr std::array<double, 4> kFixedKFractions = {0.25, 0.5, 0.75, 0.9};
inline constexpr int kSelectorClassSsgd = 0;
inline constexpr int kSelectorClassAsgd = 1;
inline constexpr int kSelectorClassGroups = 2;
inline constexpr int kSelectorClassFixedKFirst = 3;
inline constexpr std::size_t kSelectorClassCount = 3 + kFixedKFractions.size();

// The features of a job. Errors: InvalidArgument from Validate(input) /
// Validate(options), or a communication_share outside [0, 1] (naming the field).
[[nodiscard]] StatusOr<SelectorFeatures> FeaturesOf(const SelectionInput& input,
                                                    const SelectorContext& context,
                                                    const SelectOptions& options = {});
// The features as the model reads them, in the order of SelectorFeatures' fields.
[[nodiscard]] std::array<float, kSelectorFeatureCount> FeatureVector(const SelectorFeatures& f);

// The class of a mode and k on n workers (a label for training): ssgd (and any k >= n),
// asgd, groups, or the fixed-k class whose fraction x n is nearest to k (ties to the
// smaller fraction). Requires n >= 1.
[[nodiscard]] int ClassOf(api::SyncMode mode, int k, int n);

// A learned model: scores for the kSelectorClassCount classes (higher is better:
// probabilities or margins) from the features. Implementations may fail (Status) and
// may return anything; SelectLearned() checks it.
class LearnedSelector {
 public:
  virtual ~LearnedSelector() = default;
  [[nodiscard]] virtual StatusOr<std::vector<float>> Scores(const SelectorFeatures& features) = 0;
};

// The validation wrapper: asks `model` for scores and returns the allowed class with the
// highest finite score (NaN and infinities are never chosen; ties go to the lower
// class) as a Selection that obeys the same rules as Select()'s:
//  - asgd only for ParameterServer (or allow_asgd_with_allreduce), n > 1, min_k <= 1;
//  - groups only when ClusterByTime (options' thresholds, consider_groups) gives more
//    than one group, each of at least min_k workers;
//  - fixed_k: k = clamp(round(fraction x n), max(1, min_k), n); k = n becomes ssgd;
//  - ssgd always allowed.
// With options.learned_override_margin > 0 the heuristic's choice (Select()) is returned
// instead unless the chosen class outscores the heuristic's class (ClassOf its mode and
// k) by at least that margin (the model overrides the heuristic only where it is sure),
// and also when the cost model's estimate for the chosen class exceeds
// options.learned_max_estimate_ratio x the heuristic's estimate (when that is finite).
// The Selection's groups follow Select()'s convention, its estimate is the chosen mode's
// cost model (fixed-k by FixedKMeanField), and its candidates hold that one candidate.
// Errors: InvalidArgument from FeaturesOf; the model's own error; InvalidArgument
// "model output: ..." when it returned other than kSelectorClassCount scores or no
// finite score for an allowed class. The caller falls back to the heuristic on error.
[[nodiscard]] StatusOr<Selection> SelectLearned(LearnedSelector& model,
                                                const SelectionInput& input,
                                                const SelectorContext& context,
                                                const SelectOptions& options = {});

}  // namespace star::select
