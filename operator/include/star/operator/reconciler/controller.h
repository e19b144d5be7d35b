// What a Manager (manager.h) runs: reconcilers of work-queue keys, and runnables that
// start once the caches are synced (controller-runtime's reconcile.Reconciler and
// manager.Runnable).
#pragma once

#include <chrono>
#include <string>

#include "star/core/status.h"

namespace star::op {

class Reconciler {
 public:
  virtual ~Reconciler() = default;
  // Level-based: re-reads the object named by `key` from the caches, computes what should
  // exist and applies it idempotently. Returns how long to wait before `key` must be
  // looked at again (0 = not needed). A retryable API error (RetryableApiError) or NotFound is
  // requeued with backoff; other errors are logged and requeued with backoff as well.
  // Called from several threads, never twice at once for the same key.
  virtual StatusOr<std::chrono::milliseconds> Reconcile(const std::string& key) = 0;
};

class Runnable {
 public:
  virtual ~Runnable() = default;
  // Starts serving (threads, listeners). Called once, after the caches synced and before
  // any reconcile. An error stops the Manager's start.
  [[nodiscard]] virtual Status Start() = 0;
  // Stops; idempotent; called before the caches stop.
  virtual void Stop() = 0;
};

}  // namespace star::op
