#include "store/store_util.h"

#include <charconv>

namespace star::shim {

Status KeyTimeout(const std::string& key, std::chrono::milliseconds timeout) {
  return Status::DeadlineExceeded("store: key \"" + key + "\" not set within " +
                                  std::to_string(timeout.count()) + " ms");
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
    return Status::InvalidArgument("store: key \"" + key + "\" holds \"" + s +
                                   "\", not an integer counter");
  }
  return out;
}

}  // namespace star::shim
