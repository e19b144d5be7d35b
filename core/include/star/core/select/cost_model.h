// Cost models of the synchronization modes (ALGORITHMS.md sections 2 and 3).
//
// Every mode is scored by its estimated seconds per unit of training progress:
//     (seconds between model updates) x I(effective batch of an update),
// with I(b) = 1 + phi / b (converge::UpdatesFactor): the time-to-accuracy up to a
// constant factor common to all modes. Lower is better.
//
// Common preconditions (asserted in debug builds; Select() validates its input first):
// `t` (seconds per iteration of each worker, compute + own communication, excluding
// waiting) is non-empty with every entry finite and > 0; batch_per_worker > 0;
// noise_scale >= 0.
#pragma once

#include <vector>

namespace star::select {

// SSGD: every update waits for all n workers: interval t_max, batch n * B.
// Returns t_max * I(n B). O(n).
[[nodiscard]] double SsgdSecondsPerProgress(const std::vector<double>& t, double batch_per_worker,
                                            double noise_scale);

// ASGD (parameter server): every gradient is its own update: interval 1 / sum_i(1/t_i),
// batch B. Two penalties make it comparable with the synchronous modes:
//  - staleness: an ASGD update is on average n - 1 versions old (exactly n - 1 over a
//    long run, for any t); following staleness-aware ASGD (learning rate / staleness) an
//    update then makes 1/n of a fresh update's progress: factor n;
//  - resource_penalty (>= 1): its extra CPU and bandwidth (STAR measured 44-351% more
//    CPU, 38-427% more bandwidth than SSGD) slows the job and can create stragglers.
// Returns n * resource_penalty * I(B) / sum_i(1/t_i). With equal times this is at least
// SSGD's t * I(nB) (for resource_penalty >= 1), so ASGD never wins without stragglers.
// O(n).
[[nodiscard]] double AsgdSecondsPerProgress(const std::vector<double>& t, double batch_per_worker,
                                            double noise_scale, double resource_penalty);

// STAR's heuristic k: the first i in [1, n-1] (1-based, over the times sorted ascending,
// t_(1) <= ... <= t_(n)) with
//     I(i B) t_(i) < I((i+1) B) t_(i+1),
// i.e. the first local minimum of T(k) = I(kB) t_(k); n (SSGD) if there is none (in
// particular for n == 1 and for equal times). `t` may be in any order. O(n), plus
// O(n log n) when `t` is not sorted.
// Regression: STAR's published code tested the inverted inequality (and then discarded
// the result with a no-op assignment); this implements the rule as stated.
[[nodiscard]] int StarKStar(const std::vector<double>& t, double batch_per_worker,
                            double noise_scale);

// Dynamic groups: each group is synchronous inside and groups update independently:
//     T_dyn = 1 / sum_g 1 / (I(|g| B) * max_{i in g} t_i).
// `groups` partitions (a subset of) the worker ids 0..n-1; every group non-empty.
// O(n).
[[nodiscard]] double GroupsSecondsPerProgress(const std::vector<double>& t,
                                              const std::vector<std::vector<int>>& groups,
                                              double batch_per_worker, double noise_scale);

}  // namespace star::select
