// WorkQueue: client-go's deduplicating queue with delayed and rate-limited adds.
#include "star/kube/workqueue.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <vector>

namespace star::kube {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {
// Longer waits are capped here, so time_point arithmetic cannot overflow.
constexpr milliseconds kLongest = std::chrono::hours(24 * 365);
}  // namespace

struct WorkQueue::Impl {
  explicit Impl(Options o) : options(o) {}

  const Options options;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> queue;     // ready keys, in order
  std::set<std::string> dirty;       // keys that need processing (queued, or re-added while processing)
  std::set<std::string> processing;  // handed out by Get, not yet Done
  std::map<std::string, Clock::time_point> waiting;  // AddAfter: key -> when it becomes ready
  std::map<std::string, int> failures;
  bool shutting_down = false;

  void AddLocked(const std::string& key) {
    if (shutting_down || dirty.count(key) != 0) return;
    dirty.insert(key);
    if (processing.count(key) != 0) return;  // queued again by Done
    queue.push_back(key);
    cv.notify_one();
  }

  // Moves the delayed keys that are due into the queue, earliest first; returns when the
  // next one is due (max() if none).
  Clock::time_point PromoteLocked() {
    const auto now = Clock::now();
    std::vector<std::pair<Clock::time_point, std::string>> due;
    auto next = Clock::time_point::max();
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (it->second <= now) {
        due.emplace_back(it->second, it->first);
        it = waiting.erase(it);
      } else {
        next = std::min(next, it->second);
        ++it;
      }
    }
    std::sort(due.begin(), due.end());
    for (const auto& [when, key] : due) AddLocked(key);
    return next;
  }

  milliseconds BackoffLocked(const std::string& key) const {
    auto it = failures.find(key);
    const int n = it == failures.end() ? 0 : it->second;
    milliseconds delay = options.base_delay;
    for (int i = 0; i < n && delay < options.max_delay; ++i) delay *= 2;
    return std::min(delay, options.max_delay);
  }

  void AddAfterLocked(const std::string& key, milliseconds delay) {
    if (shutting_down) return;
    if (delay.count() <= 0) {
      AddLocked(key);
      return;
    }
    const auto when = Clock::now() + std::min(delay, kLongest);
    auto [it, inserted] = waiting.emplace(key, when);
    if (!inserted) it->second = std::min(it->second, when);  // the earlier time wins
    cv.notify_all();  // a Get may now need to wake earlier
  }
};

WorkQueue::WorkQueue(Options options) : impl_(std::make_unique<Impl>(options)) {}

WorkQueue::~WorkQueue() { ShutDown(); }

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, milliseconds delay) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->AddAfterLocked(key, delay);
}

void WorkQueue::AddRateLimited(const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const milliseconds delay = impl_->BackoffLocked(key);
  int& n = impl_->failures[key];
  if (n < 64) ++n;
  impl_->AddAfterLocked(key, delay);
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->failures.erase(key);
}

int WorkQueue::Failures(const std::string& key) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->failures.find(key);
  return it == impl_->failures.end() ? 0 : it->second;
}

milliseconds WorkQueue::NextBackoff(const std::string& key) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->BackoffLocked(key);
}

std::optional<std::string> WorkQueue::Get(milliseconds timeout) {
  const auto deadline = Clock::now() + std::clamp(timeout, milliseconds(0), kLongest);
  std::unique_lock<std::mutex> lock(impl_->mu);
  while (true) {
    if (impl_->shutting_down) return std::nullopt;
    const auto next_due = impl_->PromoteLocked();
    if (!impl_->queue.empty()) break;
    const auto now = Clock::now();
    if (now >= deadline) return std::nullopt;
    impl_->cv.wait_until(lock, std::min(deadline, next_due));
  }
  std::string key = std::move(impl_->queue.front());
  impl_->queue.pop_front();
  impl_->dirty.erase(key);
  impl_->processing.insert(key);
  return key;
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->processing.erase(key) == 0) return;  // not being processed: a stray Done
  if (impl_->dirty.count(key) != 0 && !impl_->shutting_down) {
    impl_->queue.push_back(key);
    impl_->cv.notify_one();
  }
}

void WorkQueue::ShutDown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->shutting_down = true;
    impl_->waiting.clear();
  }
  impl_->cv.notify_all();
}

size_t WorkQueue::Len() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->PromoteLocked();
  return impl_->queue.size();
}

}  // namespace star::kube
