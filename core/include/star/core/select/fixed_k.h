// Fixed-k ("x-out-of-n") synchronization: the deterministic arrival simulation.
//
// The simulated process (ALGORITHMS.md section 3): all workers start together at time 0
// and compute gradients back to back, worker i finishing one every t_i seconds (its
// m-th at m * t_i): a worker hands its gradient to the parameter store and continues
// with the newest parameters there, it never waits on peers. An update fires as soon as
// k DISTINCT workers have handed in a gradient since the previous update (the round);
// it sums every gradient handed in during the round, including a fast worker's second
// one and gradients arriving at exactly that instant. Late gradients are never dropped:
// a gradient that missed an update is in the next one. An update is normalised by the
// number of gradients it actually summed (STAR's code divided by n: a bug), so its
// effective batch is (gradients summed) x B.
//
// Properties (each tested):
//  - k = n: interval t_max exactly (the slowest worker closes every round);
//  - k = 1: every arrival is an update: interval -> 1 / sum_i(1/t_i) (ASGD's rate), within
//    a relative n / simulated_updates, less where arrivals coincide;
//  - the interval is non-decreasing in k (the arrival times do not depend on k, and a
//    round needing more distinct workers cannot close earlier).
// Staleness (versions a summed gradient missed) is reported, not penalised: with k near
// n it is 0 or 1; with small k and very unequal times it grows as in ASGD.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace star::select {

struct FixedKSimulation {
  double interval_seconds = 0;    // time of the last simulated update / updates
  double mean_contributions = 0;  // mean gradients summed per update (effective batch / B)
  double mean_staleness = 0;      // mean, over summed gradients, of the versions missed
  int max_staleness = 0;          // largest staleness of any summed gradient
  int updates = 0;                // updates simulated
  int64_t arrivals = 0;           // gradients simulated
};

// Simulates `simulated_updates` updates, or fewer once `max_arrivals` gradients were
// simulated (at least one update always completes).
// Requires t as in cost_model.h, 1 <= k <= t.size(), simulated_updates >= 1,
// max_arrivals >= 1. Deterministic. Time O(min(arrivals x log n, updates x n)) (a heap
// of arrivals for small k, one O(n) selection per update for k >= n / 8); arrivals is
// about updates x k when times are similar. O(n) memory.
[[nodiscard]] FixedKSimulation SimulateFixedK(
    const std::vector<double>& t, int k, int simulated_updates,
    int64_t max_arrivals = std::numeric_limits<int64_t>::max());

// The fixed-k rates in the limit of many workers with unrelated phases (the large-job
// model Select() uses where simulating every worker for many rounds is too slow): in a
// steady state with update interval T, worker i hands in a gradient during a round with
// probability min(1, T / t_i), so T is the smallest interval at which the expected
// number of distinct workers per round reaches k:  sum_i min(1, T / t_i) = k.
// Gradients summed per update = T x sum_i(1 / t_i).
// Exact at the ends: k = n gives t_max, k = 1 gives 1 / sum_i(1/t_i) (ASGD's rate), and
// T is non-decreasing in k. Within a few percent of a long SimulateFixedK run for
// k >= n / 10 on varied times (tested). Only interval_seconds and mean_contributions
// are set. Requires t as in cost_model.h and 1 <= k <= t.size(). O(n log n).
[[nodiscard]] FixedKSimulation FixedKMeanField(const std::vector<double>& t, int k);

// SimulateFixedK(t, k, simulated_updates).interval_seconds.
[[nodiscard]] double FixedKInterval(const std::vector<double>& t, int k, int simulated_updates);

// interval x I(mean_contributions x B): the fixed-k candidate's seconds per progress.
[[nodiscard]] double FixedKSecondsPerProgress(const FixedKSimulation& sim,
                                              double batch_per_worker, double noise_scale);

}  // namespace star::select
