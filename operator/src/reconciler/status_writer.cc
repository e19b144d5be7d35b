#include "star/operator/reconciler/status_writer.h"

#include "reconciler/loop_events.h"

namespace star::op {

Status StatusWriter::Start() {
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void StatusWriter::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void StatusWriter::Run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, interval_, [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    WriteOnce();
    lock.lock();
  }
}

void StatusWriter::WriteOnce() {
  for (JobUpdate& u : registry_->Drain()) {
    manager_->metrics()->JobState(u.key, u.mode, u.stragglers);
    auto job = manager_->cache().Get(Kind::kTrainingJob, u.key);
    if (!job) continue;
    const std::string key = u.key;
    const std::vector<TimelineEvent> events = u.events;
    const bool needs_changed = u.needs_changed;
    records_->WriteReported(std::move(u));
    for (const TimelineEvent& e : events) events_->Emit(*job, EventOfLoopEvent(e));
    if (needs_changed) manager_->Enqueue(key);  // its reallocation plan is due
  }
}

}  // namespace star::op
