// Internal helpers shared by the Store implementations.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "star/core/status.h"
#include "star/shim/store.h"

namespace star::shim {

// DeadlineExceeded: store: key "k" not set within N ms
Status KeyTimeout(const std::string& key, std::chrono::milliseconds timeout);

// now + timeout, saturated at time_point::max() (a timeout of any size never overflows);
// a negative timeout is now.
std::chrono::steady_clock::time_point DeadlineAfter(std::chrono::steady_clock::time_point now,
                                                    std::chrono::milliseconds timeout);

// value + delta; InvalidArgument naming the key if the sum leaves int64.
StatusOr<int64_t> AddCounter(const std::string& key, int64_t value, int64_t delta);

// Counters are stored as decimal text.
Bytes CounterBytes(int64_t value);
// InvalidArgument naming the key if `value` is not a decimal integer.
StatusOr<int64_t> ParseCounter(const std::string& key, const Bytes& value);

}  // namespace star::shim
