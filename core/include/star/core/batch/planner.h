// Batch orchestration (BOA, ALGORITHMS.md section 6): choose per-worker batch sizes that
// minimise the iteration makespan under a linear time model, exactly.
//
// Each worker's iteration time is modelled as t_i(b) = alpha_i * b + beta_i (fitted by
// FitLinear from measured iterations). PlanBatches picks integers b_i >= min_batch with
// sum b_i = global_batch minimising max_i t_i(b_i). GradientWeights gives the weights
// under which the averaged update equals the global-batch gradient.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/status.h"

namespace star::batch {

// t(b) = alpha * b + beta seconds; alpha >= 0 (seconds per sample), beta >= 0 (seconds).
struct WorkerModel {
  double alpha = 0;
  double beta = 0;
};

struct PlanInput {
  int64_t global_batch = 0;  // G: samples per update over all workers
  int64_t min_batch = 1;     // M: every worker gets at least this many, >= 1
  std::vector<WorkerModel> workers;
};

struct BatchPlan {
  std::vector<int64_t> batches;  // one per worker, in input order
  double makespan_seconds = 0;   // max_i alpha_i * batches[i] + beta_i
};

// Largest accepted global batch; keeps every count exactly representable as a double.
inline constexpr int64_t kMaxGlobalBatch = int64_t{1} << 40;

// OK, or InvalidArgument naming the first bad field:
//   "workers: must not be empty"
//   "workers[2].alpha: must be >= 0, got -1"
//   "min_batch: must be >= 1, got 0"
//   "global_batch: must be >= min_batch * workers (= 64), got 10"
[[nodiscard]] Status Validate(const PlanInput& in);

// Decodes the `star plan-batches` input
//   {"global_batch":G,"min_batch":M,"workers":[{"alpha":A,"beta":B},...]}
// ("min_batch" optional, default 1; unknown fields rejected) and validates it.
// Errors name the field path, e.g. "workers[1].beta: must be a number, got string".
[[nodiscard]] StatusOr<PlanInput> PlanInputFromJson(const nlohmann::json& j);

// Exactly {"batches":[...],"makespan_seconds":X}.
nlohmann::json ToJson(const BatchPlan& plan);

// Exact integer min-max: minimises max_i alpha_i b_i + beta_i subject to sum b_i = G,
// b_i >= M (costs evaluated in double, as written). Workers with alpha = 0 are allowed.
//
// Among the optimal assignments it returns a canonical one: the result of handing out
// the G - n*M extra samples one at a time, each to the worker that would finish
// earliest with it, ties going to the worker with the smaller batch, then the lower
// index. (That greedy is O((G - nM) log n); this function gets the same answer without
// iterating over samples.)
// Errors: Validate's. Complexity: O(n log n) typically (a bracketing step, then a
// selection among O(n) candidate finishing times); never worse than O(n * 64) plus a
// sort of O(n) values.
[[nodiscard]] StatusOr<BatchPlan> PlanBatches(const PlanInput& in);

// Least-squares fit of seconds = alpha * batch + beta.
// Requires >= 2 samples at >= 2 distinct batch sizes (one batch size cannot separate
// alpha from beta: the caller should then keep its previous model, or assume
// alpha = seconds / batch, beta = 0); batch sizes must be finite and > 0, seconds
// finite and >= 0. Errors name the sample: "batch_and_seconds[3].seconds: ...".
// Physically impossible fits are clamped, keeping a least-squares fit under the
// constraint: a negative slope becomes alpha = 0, beta = mean(seconds); a negative
// intercept becomes beta = 0 with alpha fitted through the origin.
[[nodiscard]] StatusOr<WorkerModel> FitLinear(
    const std::vector<std::pair<double, double>>& batch_and_seconds);

// w_i = b_i / sum_j b_j: weighting each worker's mean gradient by w_i makes the update
// equal the mean gradient over the whole global batch. Empty input gives an empty
// result; a zero total gives all-zero weights.
std::vector<double> GradientWeights(const std::vector<int64_t>& batches);

}  // namespace star::batch
