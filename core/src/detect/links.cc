#include "star/core/detect/links.h"

#include <algorithm>

#include "cohort.h"

namespace star::detect {

namespace {

// A link out of a worker is taken as paced by the link into it (not slow of its own) when
// the link in is at least this many times slower.
constexpr double kPacedRatio = 1.25;

}  // namespace

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
  std::vector<double> v = l.per_byte;
  l.level = internal::MedianInPlace(v.data(), v.size());
  fresh_ = false;
}

bool LinkTable::Slow(int receiver) const {
  if (receiver < 0 || verdict_.typical <= 0) return false;
  const Link& l = links_[static_cast<size_t>(receiver)];
  return !l.per_byte.empty() && l.level >= options_.slow_ratio * verdict_.typical;
}

bool LinkTable::SlowOut(int worker) const {
  const int out = verdict_.receiver_of[static_cast<size_t>(worker)];
  if (!Slow(out)) return false;
  // A worker forwards what it receives: behind a much slower link into it, its own link
  // out is timed slow too (its sends wait on its receives). That is not its link's.
  return !(Slow(worker) && links_[static_cast<size_t>(worker)].level >=
                               kPacedRatio * links_[static_cast<size_t>(out)].level);
}

void LinkTable::Refresh() {
  if (fresh_) return;
  fresh_ = true;
  const size_t n = links_.size();
  Verdict v;
  v.receiver_of.assign(n, -1);
  v.is_named.assign(n, 0);
  std::vector<double> levels;
  for (size_t r = 0; r < n; ++r) {
    const Link& l = links_[r];
    if (l.per_byte.empty()) continue;
    levels.push_back(l.level);
    v.slowest = std::max(v.slowest, l.level);
    v.receiver_of[static_cast<size_t>(l.sender)] = static_cast<int>(r);
  }
  if (levels.size() >= 3) {
    // The faster half: a worker slow both ways slows two links, half of a 4-ring's, and
    // the median of all would sit between the slow and the fast ones.
    std::sort(levels.begin(), levels.end());
    v.typical = internal::MedianInPlace(levels.data(), (levels.size() + 1) / 2);
  }
  verdict_ = std::move(v);
  for (size_t w = 0; w < n; ++w) {
    if (!SlowOut(static_cast<int>(w))) continue;
    const int out = verdict_.receiver_of[w];
    // The slow link w -> out is w's unless `out` is slow both ways (then it is out's).
    if (Slow(static_cast<int>(w)) || !SlowOut(out)) {
      verdict_.named.push_back(static_cast<int>(w));
      verdict_.is_named[w] = 1;
    }
  }
}

const std::vector<int>& LinkTable::Named() {
  Refresh();
  return verdict_.named;
}

double LinkTable::OwnShare(int worker) {
  Refresh();
  if (verdict_.named.empty() || worker < 0 || worker >= static_cast<int>(links_.size()) ||
      verdict_.is_named[static_cast<size_t>(worker)]) {
    return 1;
  }
  return verdict_.slowest > 0 ? std::clamp(verdict_.typical / verdict_.slowest, 1e-3, 1.0) : 1;
}

double LinkTable::Slowdown(int receiver) {
  Refresh();
  if (receiver < 0 || receiver >= static_cast<int>(links_.size()) || verdict_.typical <= 0) return 1;
  const Link& l = links_[static_cast<size_t>(receiver)];
  return l.per_byte.empty() ? 1 : l.level / verdict_.typical;
}

double LinkTable::StrongSlowdown(int worker, bool recurrence) {
  Refresh();
  if (worker < 0 || worker >= static_cast<int>(links_.size()) ||
      !verdict_.is_named[static_cast<size_t>(worker)]) {
    return 0;
  }
  const Link& l = links_[static_cast<size_t>(verdict_.receiver_of[static_cast<size_t>(worker)])];
  const size_t n = l.per_byte.size();
  if (n < 2) return 0;  // one reading may be a hiccup
  const double floor = (recurrence ? options_.recurrence_ratio : options_.strong_ratio) * verdict_.typical;
  return l.per_byte[n - 1] >= floor && l.per_byte[n - 2] >= floor ? l.level / verdict_.typical : 0;
}

}  // namespace star::detect
