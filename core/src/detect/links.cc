#include "star/core/detect/links.h"

#include <algorithm>

#include "cohort.h"

namespace star::detect {

LinkTable::LinkTable(int workers, LinkOptions options)
    : options_(options), links_(static_cast<size_t>(std::max(workers, 0))) {}

void LinkTable::Observe(int receiver, const api::LinkReading& reading) {
  const int n = static_cast<int>(links_.size());
  if (receiver < 0 || receiver >= n || reading.peer < 0 || reading.peer >= n ||
      reading.peer == receiver || reading.bytes < 1 || !(reading.seconds >= 0)) {
    return;
  }
  Link& l = links_[static_cast<size_t>(receiver)];
  if (l.sender != reading.peer) {
    l.sender = reading.peer;
    l.per_byte.clear();
  }
  l.per_byte.push_back(reading.seconds / static_cast<double>(reading.bytes));
  const size_t keep = static_cast<size_t>(std::clamp(options_.history, 1, 64));
  if (l.per_byte.size() > keep) l.per_byte.erase(l.per_byte.begin());
}

double LinkTable::PerByte(const Link& l) const {
  if (l.per_byte.empty()) return 0;
  std::vector<double> v = l.per_byte;
  return internal::MedianInPlace(v.data(), v.size());
}

double LinkTable::MedianPerByte() const {
  std::vector<double> v;
  for (const Link& l : links_) {
    if (!l.per_byte.empty()) v.push_back(PerByte(l));
  }
  return v.size() < 3 ? 0 : internal::MedianInPlace(v.data(), v.size());
}

bool LinkTable::Slow(int receiver, double median) const {
  if (receiver < 0 || median <= 0) return false;
  const Link& l = links_[static_cast<size_t>(receiver)];
  return !l.per_byte.empty() && PerByte(l) >= options_.slow_ratio * median;
}

int LinkTable::ReceiverOf(int sender) const {
  for (size_t r = 0; r < links_.size(); ++r) {
    if (links_[r].sender == sender && !links_[r].per_byte.empty()) return static_cast<int>(r);
  }
  return -1;
}

std::vector<int> LinkTable::Named() const {
  const double median = MedianPerByte();
  std::vector<int> named;
  for (int w = 0; w < static_cast<int>(links_.size()); ++w) {
    const int out = ReceiverOf(w);
    if (!Slow(out, median)) continue;
    // The slow link w -> out is w's unless `out` is slow both ways (then it is out's).
    const bool in_slow = Slow(w, median);
    const bool receiver_both_ways = Slow(ReceiverOf(out), median);
    if (in_slow || !receiver_both_ways) named.push_back(w);
  }
  return named;
}

double LinkTable::OwnShare(int worker) const {
  const std::vector<int> named = Named();
  if (named.empty()) return 1;
  if (std::find(named.begin(), named.end(), worker) != named.end()) return 1;
  double slowest = 0;
  for (const Link& l : links_) slowest = std::max(slowest, PerByte(l));
  const double median = MedianPerByte();
  return slowest > 0 ? std::clamp(median / slowest, 1e-3, 1.0) : 1;
}

double LinkTable::Slowdown(int receiver) const {
  const double median = MedianPerByte();
  if (receiver < 0 || receiver >= static_cast<int>(links_.size()) || median <= 0) return 1;
  const Link& l = links_[static_cast<size_t>(receiver)];
  return l.per_byte.empty() ? 1 : PerByte(l) / median;
}

}  // namespace star::detect
