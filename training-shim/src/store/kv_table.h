// KvTable: the store server's keys and values, within StoreLimits.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "star/core/status.h"
#include "star/shim/store.h"
#include "star/shim/store_server.h"

namespace star::shim {

// Not thread-safe: the server calls it under its own mutex.
class KvTable {
 public:
  explicit KvTable(const StoreLimits& limits) : limits_(limits) {}

  // InvalidArgument naming the key's length and the limit if it is too long.
  [[nodiscard]] Status CheckKey(const std::string& key) const;
  // InvalidArgument naming the value's size and the limit if it is too large.
  [[nodiscard]] Status CheckValue(size_t bytes) const;
  // Stores key = value. InvalidArgument for a key or value over its limit; OutOfRange when
  // the table would pass max_keys or max_total_bytes (nothing changes then).
  [[nodiscard]] Status Set(const std::string& key, Bytes value);
  // Adds delta to the counter at key (absent = 0) and returns the new value.
  // InvalidArgument if key holds no counter or the sum leaves int64; OutOfRange for a full
  // table.
  [[nodiscard]] StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  // The value at key, or nullptr. Valid until the next Set/Add.
  const Bytes* Find(const std::string& key) const;

  size_t keys() const { return kv_.size(); }
  // Bytes of keys and values held.
  size_t bytes() const { return bytes_; }

 private:
  const StoreLimits limits_;
  std::map<std::string, Bytes> kv_;
  size_t bytes_ = 0;
};

}  // namespace star::shim
