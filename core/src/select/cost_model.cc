#include "star/core/select/cost_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

#include "select/sorted_internal.h"
#include "star/core/converge/updates_factor.h"

namespace star::select {

using converge::UpdatesFactor;

double SsgdSecondsPerProgress(const std::vector<double>& t, double batch_per_worker,
                              double noise_scale) {
  assert(!t.empty());
  const double t_max = *std::max_element(t.begin(), t.end());
  return t_max *
         UpdatesFactor(static_cast<double>(t.size()) * batch_per_worker, noise_scale);
}

double AsgdSecondsPerProgress(const std::vector<double>& t, double batch_per_worker,
                              double noise_scale, double resource_penalty) {
  assert(!t.empty());
  assert(resource_penalty >= 1);
  double rate = 0;
  for (double ti : t) rate += 1.0 / ti;
  const double staleness = static_cast<double>(t.size());
  return staleness * resource_penalty * UpdatesFactor(batch_per_worker, noise_scale) / rate;
}

namespace internal {

SortedTimes SortTimes(const std::vector<double>& t) {
  SortedTimes s;
  s.order.resize(t.size());
  std::iota(s.order.begin(), s.order.end(), 0);
  std::stable_sort(s.order.begin(), s.order.end(), [&](int a, int b) { return t[a] < t[b]; });
  s.seconds.resize(t.size());
  for (size_t r = 0; r < t.size(); ++r) s.seconds[r] = t[s.order[r]];
  return s;
}

int StarKStarSorted(const std::vector<double>& s, double batch_per_worker, double noise_scale) {
  assert(!s.empty() && std::is_sorted(s.begin(), s.end()));
  const int n = static_cast<int>(s.size());
  // T(i) = I(i B) t_(i); s is 0-based, so t_(i) = s[i - 1].
  double t_here = UpdatesFactor(batch_per_worker, noise_scale) * s[0];
  for (int i = 1; i < n; ++i) {
    const double t_next = UpdatesFactor((i + 1) * batch_per_worker, noise_scale) * s[i];
    if (t_here < t_next) return i;
    t_here = t_next;
  }
  return n;
}

}  // namespace internal

int StarKStar(const std::vector<double>& t, double batch_per_worker, double noise_scale) {
  assert(!t.empty());
  if (std::is_sorted(t.begin(), t.end())) {
    return internal::StarKStarSorted(t, batch_per_worker, noise_scale);
  }
  std::vector<double> sorted = t;
  std::sort(sorted.begin(), sorted.end());
  return internal::StarKStarSorted(sorted, batch_per_worker, noise_scale);
}

double GroupsSecondsPerProgress(const std::vector<double>& t,
                                const std::vector<std::vector<int>>& groups,
                                double batch_per_worker, double noise_scale) {
  assert(!groups.empty());
  double rate = 0;  // sum over groups of progress per second
  for (const auto& g : groups) {
    assert(!g.empty());
    double t_max = 0;
    for (int id : g) {
      assert(id >= 0 && static_cast<size_t>(id) < t.size());
      t_max = std::max(t_max, t[id]);
    }
    rate += 1.0 / (UpdatesFactor(static_cast<double>(g.size()) * batch_per_worker, noise_scale) *
                   t_max);
  }
  return 1.0 / rate;
}

}  // namespace star::select
