// DecisionRecorder: writes each job's new decisions to its status (StatusRecords::
// RecordDecision) on threads of its own, so that the report endpoint answers at once
// while the API server is slow: a job's reports are answered with the newest decision
// status holds until the new one is recorded (a decision reaches the workers only once
// status holds it). A job is recorded by one thread at a time, and a job whose write
// hangs holds up no other job's while other threads are free; a failed write is retried
// with backoff (a deduplicating, rate-limited work queue of job keys).
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "star/core/status.h"
#include "star/kube/workqueue.h"
#include "star/operator/reconciler/controller.h"
#include "star/operator/reconciler/status_records.h"

namespace star::op {

class DecisionRecorder : public Runnable {
 public:
  // `records` must outlive it; `threads` >= 1 (default 4): how many jobs are written at once.
  explicit DecisionRecorder(StatusRecords* records, int threads = 4);
  ~DecisionRecorder() override { Stop(); }
  DecisionRecorder(const DecisionRecorder&) = delete;
  DecisionRecorder& operator=(const DecisionRecorder&) = delete;

  [[nodiscard]] Status Start() override;  // starts the threads
  // Stops taking requests and joins the threads (a write in flight ends first, within the
  // client's request timeout and retries). Idempotent.
  void Stop() override;

  // Records job `key`'s unrecorded decision soon. Never blocks; thread-safe; requests for
  // a job already waiting are one.
  void Request(const std::string& key);

 private:
  void Run();

  StatusRecords* records_;
  int threads_;
  kube::WorkQueue queue_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};
};

}  // namespace star::op
