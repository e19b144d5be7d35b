// NewInMemoryStore: a Store in this process (mutex + condition variable).
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "star/shim/store.h"
#include "store/store_util.h"

namespace star::shim {
namespace {

class InMemoryStore final : public Store {
 public:
  Status Set(const std::string& key, const Bytes& value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      kv_[key] = value;
    }
    cv_.notify_all();
    return Status::Ok();
  }

  StatusOr<Bytes> Get(const std::string& key, std::chrono::milliseconds timeout) override {
    const auto deadline = DeadlineAfter(std::chrono::steady_clock::now(), timeout);
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_until(lock, deadline, [&] { return kv_.count(key) > 0; })) {
      return KeyTimeout(key, timeout);
    }
    return kv_.at(key);
  }

  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    int64_t value = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = kv_.find(key);
      if (it != kv_.end()) {
        STAR_ASSIGN_OR_RETURN(value, ParseCounter(key, it->second));
      }
      STAR_ASSIGN_OR_RETURN(value, AddCounter(key, value, delta));
      kv_[key] = CounterBytes(value);
    }
    cv_.notify_all();
    return value;
  }

  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    const auto deadline = DeadlineAfter(std::chrono::steady_clock::now(), timeout);
    std::unique_lock<std::mutex> lock(mu_);
    for (const auto& key : keys) {
      if (!cv_.wait_until(lock, deadline, [&] { return kv_.count(key) > 0; })) {
        return KeyTimeout(key, timeout);
      }
    }
    return Status::Ok();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Bytes> kv_;
};

}  // namespace

std::shared_ptr<Store> NewInMemoryStore() { return std::make_shared<InMemoryStore>(); }

}  // namespace star::shim
