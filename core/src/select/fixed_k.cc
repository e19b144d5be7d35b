#include "star/core/select/fixed_k.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "select/fixed_k_internal.h"
#include "star/core/converge/updates_factor.h"

namespace star::select {
namespace internal {
namespace {

// Per-worker state shared by both loops. A worker's m-th gradient finishes at m * t_i
// (computed as a product, never accumulated, so equal times compare equal).
class Workers {
 public:
  explicit Workers(const std::vector<double>& t)
      : t_(t), done_(t.size(), 0), round_(t.size(), -1), start_version_(t.size(), 0) {}

  double NextArrival(int i) const { return static_cast<double>(done_[i] + 1) * t_[i]; }

  // Worker i hands in its next gradient during the round that becomes update
  // `updates + 1`; it continues on the current version. Returns true if it is the
  // worker's first gradient of the round.
  bool Arrive(int i, int updates, FixedKSimulation& sim, int64_t& staleness_sum,
              int& oldest_version) {
    ++sim.arrivals;
    staleness_sum += updates - start_version_[i];
    oldest_version = std::min(oldest_version, start_version_[i]);
    start_version_[i] = updates;
    ++done_[i];
    if (round_[i] == updates) return false;
    round_[i] = updates;
    return true;
  }

  // Worker i arrived exactly when update `updates` fired: its next gradient starts on it.
  void RestartAfter(int i, int updates) { start_version_[i] = updates; }

 private:
  const std::vector<double>& t_;
  std::vector<int64_t> done_;         // gradients finished
  std::vector<int> round_;            // last round the worker handed a gradient in
  std::vector<int> start_version_;    // version its current gradient is computed on
};

struct Entry {
  double time;
  int worker;
};

// Min-heap on time over one entry per worker, with replace-top.
void SiftDown(std::vector<Entry>& h, size_t pos) {
  const size_t n = h.size();
  const Entry moving = h[pos];
  while (true) {
    size_t child = 2 * pos + 1;
    if (child >= n) break;
    if (child + 1 < n && h[child + 1].time < h[child].time) ++child;
    if (!(h[child].time < moving.time)) break;
    h[pos] = h[child];
    pos = child;
  }
  h[pos] = moving;
}

}  // namespace

FixedKSimulation SimulateFixedKWith(FixedKLoop loop, const std::vector<double>& t, int k,
                                    int simulated_updates, int64_t max_arrivals) {
  const int n = static_cast<int>(t.size());
  assert(n >= 1 && k >= 1 && k <= n && simulated_updates >= 1 && max_arrivals >= 1);

  Workers workers(t);
  FixedKSimulation sim;
  double now = 0;
  int64_t contributions = 0;
  int64_t staleness_sum = 0;
  int updates = 0;

  std::vector<Entry> heap;
  std::vector<double> scratch;
  std::vector<int> at_now;  // workers that arrived exactly at `now`
  if (loop == FixedKLoop::kHeap) {
    heap.reserve(n);
    for (int i = 0; i < n; ++i) heap.push_back({t[i], i});
    for (size_t p = heap.size() / 2; p-- > 0;) SiftDown(heap, p);
  } else {
    scratch.resize(n);
  }

  while (updates < simulated_updates) {
    const int64_t before = sim.arrivals;
    int oldest_version = updates;
    at_now.clear();
    if (loop == FixedKLoop::kHeap) {
      int distinct = 0;
      // Arrivals in time order until k distinct workers are in, then those at the same
      // instant.
      while (distinct < k || heap[0].time <= now) {
        const int i = heap[0].worker;
        if (heap[0].time != now) at_now.clear();
        now = heap[0].time;
        at_now.push_back(i);
        distinct += workers.Arrive(i, updates, sim, staleness_sum, oldest_version);
        heap[0].time = workers.NextArrival(i);
        SiftDown(heap, 0);
      }
    } else {
      // The round closes at the k-th smallest first arrival; everything up to it is in.
      for (int i = 0; i < n; ++i) scratch[i] = workers.NextArrival(i);
      std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end());
      now = scratch[k - 1];
      for (int i = 0; i < n; ++i) {
        double next = workers.NextArrival(i);
        while (next <= now) {
          workers.Arrive(i, updates, sim, staleness_sum, oldest_version);
          if (next == now) at_now.push_back(i);
          next = workers.NextArrival(i);
        }
      }
    }
    ++updates;
    for (int i : at_now) workers.RestartAfter(i, updates);
    contributions += sim.arrivals - before;
    sim.max_staleness = std::max(sim.max_staleness, updates - 1 - oldest_version);
    if (sim.arrivals >= max_arrivals) break;
  }
  sim.updates = updates;
  sim.interval_seconds = now / updates;
  sim.mean_contributions = static_cast<double>(contributions) / updates;
  sim.mean_staleness = static_cast<double>(staleness_sum) / static_cast<double>(contributions);
  return sim;
}

}  // namespace internal

FixedKSimulation SimulateFixedK(const std::vector<double>& t, int k, int simulated_updates,
                                int64_t max_arrivals) {
  // Heap: about k log n per update; scan: about 4n per update.
  const auto loop = static_cast<int64_t>(k) * 8 >= static_cast<int64_t>(t.size())
                        ? internal::FixedKLoop::kScan
                        : internal::FixedKLoop::kHeap;
  return internal::SimulateFixedKWith(loop, t, k, simulated_updates, max_arrivals);
}

FixedKSimulation FixedKMeanField(const std::vector<double>& t, int k) {
  const int n = static_cast<int>(t.size());
  assert(n >= 1 && k >= 1 && k <= n);
  std::vector<double> sorted(t);
  std::sort(sorted.begin(), sorted.end());
  // suffix[j] = sum of 1/t over the n - j slowest workers.
  std::vector<double> suffix(n + 1, 0.0);
  for (int i = n - 1; i >= 0; --i) suffix[i] = suffix[i + 1] + 1.0 / sorted[i];
  FixedKSimulation out;
  out.interval_seconds = sorted.back();
  // With the j fastest workers saturated (t_(j) <= T), the expected count is
  // j + T x suffix[j]: linear in T on [t_(j-1), t_(j)].
  for (int j = 0; j < n; ++j) {
    const double T = (k - j) / suffix[j];
    const double lo = j == 0 ? 0.0 : sorted[j - 1];
    if (T >= lo && T <= sorted[j]) {
      out.interval_seconds = T;
      break;
    }
  }
  out.mean_contributions = std::min<double>(out.interval_seconds * suffix[0], n * 1.0e6);
  return out;
}

double FixedKInterval(const std::vector<double>& t, int k, int simulated_updates) {
  return SimulateFixedK(t, k, simulated_updates).interval_seconds;
}

double FixedKSecondsPerProgress(const FixedKSimulation& sim, double batch_per_worker,
                                double noise_scale) {
  return sim.interval_seconds *
         converge::UpdatesFactor(sim.mean_contributions * batch_per_worker, noise_scale);
}

}  // namespace star::select
