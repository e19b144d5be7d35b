// Internal: WorkerSession's report sender, a background thread that sends queued
// WorkerReports through star::report::ReportClient and keeps the decisions they return.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "star/core/api/decision.h"
#include "star/core/api/worker_report.h"
#include "star/core/status.h"
#include "star/report/client.h"
#include "star/shim/worker_session.h"

namespace star::shim::internal {

class ReportSender {
 public:
  // Errors: the ReportClient's (InvalidArgument naming base_url or timeout).
  static StatusOr<std::unique_ptr<ReportSender>> Create(
      report::ReportClientOptions client, int max_queued,
      std::function<void(const Status&)> on_error);
  // Sends what is still queued, then joins the thread.
  ~ReportSender();

  // Queues a report; drops the oldest queued one when max_queued are waiting.
  void Enqueue(api::WorkerReport report);
  // Decisions received since the last call whose epoch is newer than every decision
  // received before them, in arrival order.
  std::vector<api::Decision> TakeDecisions();
  // Waits until the queue is empty and no request is in flight.
  Status Flush(std::chrono::milliseconds timeout);
  ReportStats stats() const;

 private:
  ReportSender(std::unique_ptr<report::ReportClient> client, int max_queued,
               std::function<void(const Status&)> on_error);
  void Run();
  void Record(const StatusOr<std::optional<api::Decision>>& answer);

  std::unique_ptr<report::ReportClient> client_;
  const size_t max_queued_;
  std::function<void(const Status&)> on_error_;
  mutable std::mutex mu_;
  std::condition_variable work_;  // a report was queued, or stopping
  std::condition_variable idle_;  // the queue emptied with nothing in flight
  std::deque<api::WorkerReport> queue_;
  bool in_flight_ = false;
  bool stopping_ = false;
  std::vector<api::Decision> decisions_;
  int64_t newest_epoch_ = -1;
  ReportStats stats_;
  std::thread thread_;  // last: starts after every member above exists
};

}  // namespace star::shim::internal
