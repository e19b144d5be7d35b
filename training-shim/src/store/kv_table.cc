#include "store/kv_table.h"

#include "store/store_util.h"

namespace star::shim {

Status KvTable::CheckKey(const std::string& key) const {
  if (key.size() <= limits_.max_key_bytes) return Status::Ok();
  return Status::InvalidArgument("store: key of " + std::to_string(key.size()) +
                                 " bytes exceeds the limit of " +
                                 std::to_string(limits_.max_key_bytes) + " bytes");
}

Status KvTable::CheckValue(size_t bytes) const {
  if (bytes <= limits_.max_value_bytes) return Status::Ok();
  return Status::InvalidArgument("store: value of " + std::to_string(bytes) +
                                 " bytes exceeds the limit of " +
                                 std::to_string(limits_.max_value_bytes) + " bytes");
}

Status KvTable::Set(const std::string& key, Bytes value) {
  STAR_RETURN_IF_ERROR(CheckKey(key));
  STAR_RETURN_IF_ERROR(CheckValue(value.size()));
  auto it = kv_.find(key);
  if (it == kv_.end() && kv_.size() >= limits_.max_keys) {
    return Status::OutOfRange("store: full: " + std::to_string(kv_.size()) +
                              " keys, the limit (max_keys)");
  }
  // Both sizes are bounded by the limits above, so these sums cannot wrap.
  const size_t old_bytes = it == kv_.end() ? 0 : key.size() + it->second.size();
  const size_t new_total = bytes_ - old_bytes + key.size() + value.size();
  if (new_total > limits_.max_total_bytes) {
    return Status::OutOfRange("store: full: setting \"" + key.substr(0, 64) + "\" would hold " +
                              std::to_string(new_total) + " bytes, over the limit of " +
                              std::to_string(limits_.max_total_bytes) + " (max_total_bytes)");
  }
  bytes_ = new_total;
  if (it == kv_.end()) {
    kv_.emplace(key, std::move(value));
  } else {
    it->second = std::move(value);
  }
  return Status::Ok();
}

StatusOr<int64_t> KvTable::Add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  if (const Bytes* old = Find(key)) {
    STAR_ASSIGN_OR_RETURN(value, ParseCounter(key, *old));
  }
  STAR_ASSIGN_OR_RETURN(value, AddCounter(key, value, delta));
  STAR_RETURN_IF_ERROR(Set(key, CounterBytes(value)));
  return value;
}

const Bytes* KvTable::Find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

}  // namespace star::shim
