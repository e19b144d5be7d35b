// WorkQueue: the deduplicating, rate-limited work queue controllers consume
// (client-go's workqueue).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace star::kube {

// A deduplicating, rate-limited work queue of keys. A key added while queued is queued
// once; a key added while being processed is queued again after Done(). Failed keys are
// re-added with per-key exponential backoff (AddRateLimited) until Forget().
class WorkQueue {
 public:
  struct Options {
    std::chrono::milliseconds base_delay{50};
    std::chrono::milliseconds max_delay{30000};
  };
  WorkQueue() : WorkQueue(Options()) {}
  explicit WorkQueue(Options options);
  ~WorkQueue();  // ShutDown()

  void Add(const std::string& key);
  void AddAfter(const std::string& key, std::chrono::milliseconds delay);
  void AddRateLimited(const std::string& key);  // delay = base * 2^failures, capped
  void Forget(const std::string& key);          // resets the key's failure count
  int Failures(const std::string& key) const;
  // The delay the next AddRateLimited(key) would use (base * 2^Failures(key), capped).
  std::chrono::milliseconds NextBackoff(const std::string& key) const;
  // Next key; blocks up to `timeout`. nullopt on timeout or after ShutDown.
  std::optional<std::string> Get(std::chrono::milliseconds timeout);
  void Done(const std::string& key);
  void ShutDown();
  size_t Len() const;  // keys ready (not delayed, not processing)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace star::kube
