#include "star/core/select/clustering.h"

#include <algorithm>
#include <cassert>
#include <numeric>

#include "select/sorted_internal.h"

namespace star::select {
namespace internal {
namespace {

// Candidate merge of the cluster starting at rank lo (ending at mid) with the next one
// (ending at hi). Stale once either cluster changed.
struct Pair {
  double spread;
  int lo, mid, hi;
};
// Min-heap order: smallest spread first, ties by time order. A function object, so the
// heap algorithms inline it.
struct Later {
  bool operator()(const Pair& a, const Pair& b) const {
    return a.spread > b.spread || (a.spread == b.spread && a.lo > b.lo);
  }
};

}  // namespace

std::vector<std::vector<int>> ClusterSorted(const SortedTimes& sorted, double threshold_seconds,
                                            double threshold_relative) {
  const std::vector<double>& s = sorted.seconds;
  const int n = static_cast<int>(s.size());
  assert(n >= 1 && threshold_seconds >= 0 && threshold_relative >= 0);
  auto threshold = [&](int lo) { return std::max(threshold_seconds, threshold_relative * s[lo]); };

  // A cluster is a run [lo, last[lo]] of sorted ranks, identified by lo.
  std::vector<int> last(n);
  std::iota(last.begin(), last.end(), 0);
  std::vector<int> prev(n);  // lo of the cluster before, -1 for the first
  std::iota(prev.begin(), prev.end(), -1);
  std::vector<char> alive(n, 1);

  std::vector<Pair> heap;
  heap.reserve(3 * static_cast<size_t>(n));
  // A pair over its threshold never merges: neither does any later union containing it
  // (wider, with a fastest time no larger), so it is not queued at all.
  auto push = [&](int lo) {
    const int mid = last[lo];
    if (mid + 1 >= n) return;
    const int hi = last[mid + 1];
    const double spread = s[hi] - s[lo];
    if (spread > threshold(lo)) return;
    heap.push_back({spread, lo, mid, hi});
    std::push_heap(heap.begin(), heap.end(), Later{});
  };
  // Equal times merge first (spread 0) whatever the thresholds: join them up front.
  for (int lo = 0, before = -1; lo < n; before = lo, lo = last[lo] + 1) {
    int end = lo;
    while (end + 1 < n && s[end + 1] == s[lo]) alive[++end] = 0;
    last[lo] = end;
    prev[lo] = before;
  }
  for (int lo = 0; lo < n; lo = last[lo] + 1) {
    const int mid = last[lo];
    if (mid + 1 >= n) break;
    const int hi = last[mid + 1];
    const double spread = s[hi] - s[lo];
    if (spread <= threshold(lo)) heap.push_back({spread, lo, mid, hi});
  }
  std::make_heap(heap.begin(), heap.end(), Later{});

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), Later{});
    const Pair p = heap.back();
    heap.pop_back();
    if (!alive[p.lo] || last[p.lo] != p.mid || !alive[p.mid + 1] || last[p.mid + 1] != p.hi) {
      continue;
    }
    last[p.lo] = p.hi;
    alive[p.mid + 1] = 0;
    if (p.hi + 1 < n) prev[p.hi + 1] = p.lo;
    if (prev[p.lo] >= 0) push(prev[p.lo]);
    push(p.lo);
  }

  std::vector<std::vector<int>> groups;
  for (int lo = 0; lo < n; lo = last[lo] + 1) {
    std::vector<int> g(sorted.order.begin() + lo, sorted.order.begin() + last[lo] + 1);
    std::sort(g.begin(), g.end());
    groups.push_back(std::move(g));
  }
  return groups;
}

}  // namespace internal

std::vector<std::vector<int>> ClusterByTime(const std::vector<double>& t,
                                            double threshold_seconds,
                                            double threshold_relative) {
  assert(!t.empty());
  return internal::ClusterSorted(internal::SortTimes(t), threshold_seconds, threshold_relative);
}

}  // namespace star::select
