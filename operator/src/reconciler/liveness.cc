#include "star/operator/reconciler/liveness.h"

#include <algorithm>

namespace star::op {

ReconcileLiveness::ReconcileLiveness(int threads, std::chrono::milliseconds stuck_after)
    : stuck_after_(stuck_after), threads_(static_cast<size_t>(std::max(threads, 1))) {}

void ReconcileLiveness::Begin(int thread, const std::string& key, Clock::time_point now) {
  std::lock_guard lock(mu_);
  Running& r = threads_.at(static_cast<size_t>(thread));
  r.key = key;
  r.since = now;
}

void ReconcileLiveness::End(int thread) {
  std::lock_guard lock(mu_);
  threads_.at(static_cast<size_t>(thread)).since.reset();
}

std::optional<std::string> ReconcileLiveness::Stuck(Clock::time_point now) const {
  std::lock_guard lock(mu_);
  const Running* longest = nullptr;
  for (const Running& r : threads_) {
    if (r.since && (longest == nullptr || *r.since < *longest->since)) longest = &r;
  }
  if (longest == nullptr || now - *longest->since <= stuck_after_) return std::nullopt;
  using std::chrono::duration_cast;
  using std::chrono::seconds;
  return "reconcile of " + longest->key + " running for " +
         std::to_string(duration_cast<seconds>(now - *longest->since).count()) + " s (limit " +
         std::to_string(duration_cast<seconds>(stuck_after_).count()) + " s)";
}

}  // namespace star::op
