// Store: the rendezvous key-value store every worker of a job meets through.
//
// Hosted by rank 0 or the controller (StoreServer), reached over TCP by every worker
// (ConnectStore); an in-memory implementation serves tests that run ranks as threads.
// Keys are strings, values bytes. Every wait has a timeout. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::shim {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;
  // Sets key to value (overwrites).
  [[nodiscard]] virtual Status Set(const std::string& key, const Bytes& value) = 0;
  // Waits until key exists, up to `timeout`; DeadlineExceeded naming the key otherwise.
  [[nodiscard]] virtual StatusOr<Bytes> Get(const std::string& key,
                                            std::chrono::milliseconds timeout) = 0;
  // Atomically adds delta to the integer counter at key (absent = 0); returns the new value.
  [[nodiscard]] virtual StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
  // Waits until every key exists, up to `timeout`.
  [[nodiscard]] virtual Status Wait(const std::vector<std::string>& keys,
                                    std::chrono::milliseconds timeout) = 0;
};

// A store in this process (for ranks run as threads, and for tests).
std::shared_ptr<Store> NewInMemoryStore();

}  // namespace star::shim
