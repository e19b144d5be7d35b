#include "store/store_util.h"

#include <charconv>

namespace star::shim {

Status KeyTimeout(const std::string& key, std::chrono::milliseconds timeout) {
  return Status::DeadlineExceeded("store: key \"" + key + "\" not set within " +
                                  std::to_string(timeout.count()) + " ms");
}

std::chrono::steady_clock::time_point DeadlineAfter(std::chrono::steady_clock::time_point now,
                                                    std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  if (timeout <= std::chrono::milliseconds::zero()) return now;
  // Compare in milliseconds, where timeout cannot overflow; the room left fits in them.
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now);
  if (timeout >= room) return Clock::time_point::max();
  return now + std::chrono::duration_cast<Clock::duration>(timeout);
}

StatusOr<int64_t> AddCounter(const std::string& key, int64_t value, int64_t delta) {
  int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum)) {
    return Status::InvalidArgument("store: counter \"" + key + "\" at " + std::to_string(value) +
                              " plus " + std::to_string(delta) + " leaves the int64 range");
  }
  return sum;
}

Bytes CounterBytes(int64_t value) {
  const std::string s = std::to_string(value);
  return Bytes(s.begin(), s.end());
}

StatusOr<int64_t> ParseCounter(const std::string& key, const Bytes& value) {
  const std::string s(value.begin(), value.end());
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
    const std::string shown = s.size() > 64 ? s.substr(0, 64) + "..." : s;
    return Status::InvalidArgument("store: key \"" + key + "\" holds \"" + shown +
                                   "\", not an integer counter");
  }
  return out;
}

}  // namespace star::shim
