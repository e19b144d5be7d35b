#include "worker/report_sender.h"

#include <utility>

namespace star::shim::internal {

StatusOr<std::unique_ptr<ReportSender>> ReportSender::Create(
    report::ReportClientOptions client, int max_queued, std::function<void(const Status&)> on_error) {
  if (max_queued < 1) {
    return Status::InvalidArgument("max_queued_reports: must be >= 1, got " +
                                   std::to_string(max_queued));
  }
  STAR_ASSIGN_OR_RETURN(auto c, report::ReportClient::Create(std::move(client)));
  return std::unique_ptr<ReportSender>(new ReportSender(std::move(c), max_queued, std::move(on_error)));
}

ReportSender::ReportSender(std::unique_ptr<report::ReportClient> client, int max_queued,
                           std::function<void(const Status&)> on_error)
    : client_(std::move(client)),
      max_queued_(static_cast<size_t>(max_queued)),
      on_error_(std::move(on_error)),
      thread_([this] { Run(); }) {}

ReportSender::~ReportSender() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

void ReportSender::Enqueue(api::WorkerReport report) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= max_queued_) {
      queue_.pop_front();
      ++stats_.dropped;
    }
    queue_.push_back(std::move(report));
    ++stats_.queued;
  }
  work_.notify_one();
}

std::vector<api::Decision> ReportSender::TakeDecisions() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(decisions_, {});
}

Status ReportSender::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!idle_.wait_for(lock, timeout, [this] { return queue_.empty() && !in_flight_; })) {
    return Status::DeadlineExceeded("reports: " + std::to_string(queue_.size()) +
                                    " still queued after " + std::to_string(timeout.count()) + " ms");
  }
  return Status::Ok();
}

ReportStats ReportSender::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// Sends reports one at a time, in order, until stopping and the queue is empty.
void ReportSender::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    api::WorkerReport report = std::move(queue_.front());
    queue_.pop_front();
    in_flight_ = true;
    lock.unlock();
    auto answer = client_->Send(report);
    if (!answer.ok() && on_error_) on_error_(answer.status());
    lock.lock();
    Record(answer);
    in_flight_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

void ReportSender::Record(const StatusOr<std::optional<api::Decision>>& answer) {
  if (!answer.ok()) {
    ++stats_.failed;
    stats_.last_error = answer.status().ToString();
    return;
  }
  ++stats_.answered;
  if (answer->has_value() && (*answer)->epoch > newest_epoch_) {
    newest_epoch_ = (*answer)->epoch;
    decisions_.push_back(**answer);
    ++stats_.decisions;
  }
}

}  // namespace star::shim::internal
