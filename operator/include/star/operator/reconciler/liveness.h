// ReconcileLiveness: whether the Manager's reconcile threads make progress, for /healthz.
// Each thread marks the start and the end of every reconcile; reconciling is stuck when
// one reconcile has run longer than `stuck_after`. An idle thread (an empty queue) is
// never stuck, and neither is a reconcile waiting on a slow or stalled API server: every
// API request it makes ends within the client's request timeout and retries (10 s and
// up to 5 retries by default, well under a minute), after which the reconcile returns
// its error and is requeued with backoff. One that outlives that (a deadlock, a wait
// without a timeout) is stuck, and the kubelet's liveness probe restarts the operator.
// Thread-safe.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace star::op {

class ReconcileLiveness {
 public:
  using Clock = std::chrono::steady_clock;
  // `threads` >= 1 reconcile threads, numbered from 0; `stuck_after` > 0.
  ReconcileLiveness(int threads, std::chrono::milliseconds stuck_after);

  void Begin(int thread, const std::string& key, Clock::time_point now);  // a reconcile of `key` starts
  void End(int thread);                                                   // ... and ends
  // Why reconciling is stuck at `now` ("reconcile of ns/a running for 312 s (limit 300 s)"),
  // naming the longest-running reconcile; nullopt while it is not.
  std::optional<std::string> Stuck(Clock::time_point now) const;

 private:
  struct Running {
    std::string key;
    std::optional<Clock::time_point> since;  // nullopt: idle
  };
  std::chrono::milliseconds stuck_after_;
  mutable std::mutex mu_;
  std::vector<Running> threads_;
};

}  // namespace star::op
