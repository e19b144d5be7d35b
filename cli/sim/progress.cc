#include "sim/progress.h"

#include <algorithm>
#include <cmath>

namespace star::sim {

Progress::Progress(const ProgressModel& m) : m_(m), copies_(1) {}

void Progress::Switch(std::span<const std::vector<int>> groups) {
  double weighted = 0, workers = 0;
  for (const Copy& c : copies_) {
    weighted += c.worth * c.workers;
    workers += c.workers;
  }
  const double merged = workers > 0 ? weighted / workers : 0;
  copies_.assign(1, Copy{merged, 1, 0});
  rank0_ = 0;
  if (!m_.group_replicas || groups.empty()) return;
  copies_.clear();
  for (size_t g = 0; g < groups.size(); ++g) {
    copies_.push_back(Copy{merged, static_cast<double>(groups[g].size()), 0});
    if (std::find(groups[g].begin(), groups[g].end(), 0) != groups[g].end()) rank0_ = g;
  }
}

void Progress::Update(double time, double effective_samples, size_t group) {
  Copy& c = copies_[group < copies_.size() ? group : 0];
  const double ramp =
      m_.momentum > 0 ? 1 - std::pow(m_.momentum, static_cast<double>(c.since_switch + 1)) : 1;
  ++c.since_switch;
  ++updates_;
  c.worth += Worth(effective_samples + carry_) * ramp;
  carry_ = 0;
  if (!tta_ && copies_[rank0_].worth >= m_.min_updates) tta_ = time;
}

}  // namespace star::sim
