#include "star/operator/reconciler/decision_recorder.h"

#include <algorithm>

#include "reconciler/helpers.h"

namespace star::op {

DecisionRecorder::DecisionRecorder(StatusRecords* records, int threads)
    : records_(records), threads_(std::max(threads, 1)), queue_(kube::WorkQueue::Options{
                                                             std::chrono::milliseconds(100),
                                                             std::chrono::milliseconds(5000)}) {}

Status DecisionRecorder::Start() {
  for (int i = 0; i < threads_; ++i) workers_.emplace_back([this] { Run(); });
  return Status::Ok();
}

void DecisionRecorder::Stop() {
  stopping_ = true;
  queue_.ShutDown();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void DecisionRecorder::Request(const std::string& key) { queue_.Add(key); }

void DecisionRecorder::Run() {
  while (!stopping_) {
    std::optional<std::string> key = queue_.Get(std::chrono::milliseconds(200));
    if (!key) continue;
    const Status s = records_->RecordDecision(*key);
    if (s.ok() || s.code() == StatusCode::kNotFound) {
      queue_.Forget(*key);  // recorded, or the job is gone
    } else {
      Log("status of " + *key + ": " + s.ToString());
      queue_.AddRateLimited(*key);
    }
    queue_.Done(*key);
  }
}

}  // namespace star::op
