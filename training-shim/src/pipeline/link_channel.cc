#include "link_channel.h"

#include <chrono>
#include <string>
#include <utility>

namespace star::shim {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

void Channel::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ChannelCounters Channel::TakeCounters() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(counters_, {});
}

Outbox::Outbox(std::unique_ptr<Collective> pair, int peer, double delay_seconds)
    : Channel(std::move(pair), peer), delay_seconds_(delay_seconds) {
  thread_ = std::thread([this] { Run(); });
}

Outbox::~Outbox() { Stop(); }

Status Outbox::Post(std::vector<float> data, uint64_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) return error_;
  const auto delay = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(delay_seconds_));
  queue_.push_back({std::move(data), tag, std::chrono::steady_clock::now() + delay});
  cv_.notify_all();
  return Status::Ok();
}

Status Outbox::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return (queue_.empty() && !sending_) || !error_.ok(); });
  return error_;
}

void Outbox::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty() || !error_.ok()) return;  // stopping, and everything is sent
    // A delayed message leaves at its due time (at once when stopping).
    const auto due = queue_.front().due;
    cv_.wait_until(lock, due, [&] { return stop_; });
    Message m = std::move(queue_.front());
    queue_.pop_front();
    sending_ = true;
    lock.unlock();
    const double start = Now();
    Status s = pair_->Send(m.data.data(), m.data.size(), peer_, static_cast<uint32_t>(m.tag));
    const double seconds = Now() - start;
    lock.lock();
    sending_ = false;
    if (s.ok()) {
      ++counters_.messages;
      counters_.bytes += static_cast<int64_t>(m.data.size() * sizeof(float));
      counters_.seconds += seconds;
      counters_.latency_seconds += delay_seconds_;
    } else {
      error_ = std::move(s);
      queue_.clear();
    }
    cv_.notify_all();
  }
}

Inbox::Inbox(std::unique_ptr<Collective> pair, int peer, size_t count)
    : Channel(std::move(pair), peer), count_(count) {
  thread_ = std::thread([this] { Run(); });
}

Inbox::~Inbox() { Stop(); }

void Inbox::Expect(int messages) {
  std::lock_guard<std::mutex> lock(mu_);
  if (messages > 0) end_tag_ += static_cast<uint64_t>(messages);
  cv_.notify_all();
}

StatusOr<std::vector<float>> Inbox::Take(uint64_t tag) {
  std::unique_lock<std::mutex> lock(mu_);
  if (tag < taken_ || tag >= end_tag_) {
    return Status::FailedPrecondition("pipeline: message " + std::to_string(tag) +
                                      " is not expected (expected [" + std::to_string(taken_) +
                                      ", " + std::to_string(end_tag_) + "))");
  }
  const double start = Now();
  cv_.wait(lock, [&] { return arrived_.count(tag) > 0 || !error_.ok(); });
  counters_.seconds += Now() - start;
  auto found = arrived_.find(tag);
  if (found == arrived_.end()) return error_;
  std::vector<float> data = std::move(found->second);
  arrived_.erase(found);
  taken_ = tag + 1;
  ++counters_.messages;
  counters_.bytes += static_cast<int64_t>(data.size() * sizeof(float));
  return data;
}

void Inbox::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (next_tag_ < end_tag_ && error_.ok()); });
    if (stop_) return;
    const uint64_t tag = next_tag_;
    lock.unlock();
    std::vector<float> data(count_);
    Status s = pair_->Recv(data.data(), data.size(), peer_, static_cast<uint32_t>(tag));
    lock.lock();
    if (s.ok()) {
      arrived_.emplace(tag, std::move(data));
      ++next_tag_;
    } else {
      error_ = std::move(s);
    }
    cv_.notify_all();
  }
}

}  // namespace star::shim
