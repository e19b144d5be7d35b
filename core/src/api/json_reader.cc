#include "star/core/api/json_reader.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace star::api {

using nlohmann::json;

std::string JsonTypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::null: return "null";
    default: return "unsupported value";
  }
}

std::string JoinPath(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  std::string out(path);
  out += '.';
  out += key;
  return out;
}

std::string IndexPath(std::string_view path, size_t index) {
  std::string out(path);
  out += '[';
  out += std::to_string(index);
  out += ']';
  return out;
}

std::string FormatNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

ObjectReader::ObjectReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
  is_object_ = j_.is_object();
  if (!is_object_) {
    status_ = Status::InvalidArgument((path_.empty() ? std::string("document") : path_) +
                                      ": must be an object, got " + JsonTypeName(j_));
  }
}

bool ObjectReader::Has(std::string_view key) const { return Get(key) != nullptr; }

const json* ObjectReader::Get(std::string_view key) const {
  if (!is_object_) return nullptr;
  auto it = j_.find(key);
  if (it == j_.end()) return nullptr;
  return &*it;
}

ObjectReader& ObjectReader::Fail(std::string_view key, std::string reason) {
  if (status_.ok()) status_ = Status::InvalidArgument(FieldPath(key) + ": " + reason);
  return *this;
}

ObjectReader& ObjectReader::Merge(const Status& nested) {
  if (status_.ok() && !nested.ok()) status_ = nested;
  return *this;
}

namespace {

// Returns the field for a typed read, or nullptr (recording "missing" when required).
const json* Field(ObjectReader& r, std::string_view key, Need need) {
  const json* f = r.Get(key);
  if (f == nullptr && need == Need::kRequired) r.Fail(key, "required field is missing");
  return f;
}

bool ToInt64(const json& f, int64_t* out) {
  if (f.is_number_integer()) {
    *out = f.get<int64_t>();
    return true;
  }
  if (f.is_number_unsigned()) {
    auto u = f.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (f.is_number_float()) {
    double d = f.get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9.0e15) return false;
    *out = static_cast<int64_t>(d);
    return true;
  }
  return false;
}

}  // namespace

ObjectReader& ObjectReader::Int(std::string_view key, int64_t* out, Need need) {
  if (!Active()) return *this;
  const json* f = Field(*this, key, need);
  if (f == nullptr) return *this;
  int64_t v = 0;
  if (!ToInt64(*f, &v)) {
    return Fail(key, "must be an integer, got " +
                         (f->is_number() ? FormatNumber(f->get<double>()) : JsonTypeName(*f)));
  }
  *out = v;
  return *this;
}

ObjectReader& ObjectReader::Int(std::string_view key, int* out, Need need) {
  if (!Active()) return *this;
  int64_t v = *out;
  Int(key, &v, need);
  if (!ok()) return *this;
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    return Fail(key, "must fit in a 32-bit integer, got " + std::to_string(v));
  }
  *out = static_cast<int>(v);
  return *this;
}

ObjectReader& ObjectReader::Number(std::string_view key, double* out, Need need) {
  if (!Active()) return *this;
  const json* f = Field(*this, key, need);
  if (f == nullptr) return *this;
  if (!f->is_number()) return Fail(key, "must be a number, got " + JsonTypeName(*f));
  double v = f->get<double>();
  if (!std::isfinite(v)) return Fail(key, "must be a finite number");
  *out = v;
  return *this;
}

ObjectReader& ObjectReader::Bool(std::string_view key, bool* out, Need need) {
  if (!Active()) return *this;
  const json* f = Field(*this, key, need);
  if (f == nullptr) return *this;
  if (!f->is_boolean()) return Fail(key, "must be a boolean, got " + JsonTypeName(*f));
  *out = f->get<bool>();
  return *this;
}

ObjectReader& ObjectReader::String(std::string_view key, std::string* out, Need need) {
  if (!Active()) return *this;
  const json* f = Field(*this, key, need);
  if (f == nullptr) return *this;
  if (!f->is_string()) return Fail(key, "must be a string, got " + JsonTypeName(*f));
  *out = f->get<std::string>();
  return *this;
}

ObjectReader& ObjectReader::Enum(std::string_view key, std::string* out,
                                 std::initializer_list<std::string_view> allowed, Need need) {
  if (!Active()) return *this;
  std::string v;
  const bool present = Has(key);
  String(key, &v, need);
  if (!ok() || !present) return *this;
  for (auto a : allowed) {
    if (v == a) {
      *out = v;
      return *this;
    }
  }
  std::string list;
  for (auto a : allowed) {
    if (!list.empty()) list += ", ";
    list += a;
  }
  return Fail(key, "must be one of " + list + ", got \"" + v + "\"");
}

ObjectReader& ObjectReader::NumberArray(std::string_view key, std::vector<double>* out, Need need) {
  if (!Active()) return *this;
  const json* f = Field(*this, key, need);
  if (f == nullptr) return *this;
  if (!f->is_array()) return Fail(key, "must be an array, got " + JsonTypeName(*f));
  std::vector<double> v;
  v.reserve(f->size());
  for (size_t i = 0; i < f->size(); ++i) {
    const json& e = (*f)[i];
    const std::string at = IndexPath(key, i);
    if (!e.is_number()) return Fail(at, "must be a number, got " + JsonTypeName(e));
    double d = e.get<double>();
    if (!std::isfinite(d)) return Fail(at, "must be a finite number");
    v.push_back(d);
  }
  *out = std::move(v);
  return *this;
}

ObjectReader& ObjectReader::IntArray(std::string_view key, std::vector<int64_t>* out, Need need) {
  if (!Active()) return *this;
  const json* f = Field(*this, key, need);
  if (f == nullptr) return *this;
  if (!f->is_array()) return Fail(key, "must be an array, got " + JsonTypeName(*f));
  std::vector<int64_t> v;
  v.reserve(f->size());
  for (size_t i = 0; i < f->size(); ++i) {
    int64_t x = 0;
    if (!ToInt64((*f)[i], &x)) {
      return Fail(IndexPath(key, i), "must be an integer, got " + JsonTypeName((*f)[i]));
    }
    v.push_back(x);
  }
  *out = std::move(v);
  return *this;
}

ObjectReader& ObjectReader::AtLeast(std::string_view key, double value, double min) {
  if (!ok() || !(value < min)) return *this;
  return Fail(key, "must be >= " + FormatNumber(min) + ", got " + FormatNumber(value));
}

ObjectReader& ObjectReader::MaxItems(std::string_view key, size_t max) {
  const json* f = Active() ? Get(key) : nullptr;
  if (f == nullptr || !f->is_array() || f->size() <= max) return *this;
  return Fail(key, "must have at most " + std::to_string(max) + " items, got " +
                       std::to_string(f->size()));
}

ObjectReader& ObjectReader::AtMost(std::string_view key, double value, double max) {
  if (!ok() || !(value > max)) return *this;
  return Fail(key, "must be <= " + FormatNumber(max) + ", got " + FormatNumber(value));
}

ObjectReader& ObjectReader::Greater(std::string_view key, double value, double bound) {
  if (!ok() || value > bound) return *this;
  return Fail(key, "must be > " + FormatNumber(bound) + ", got " + FormatNumber(value));
}

ObjectReader& ObjectReader::RejectUnknown(std::initializer_list<std::string_view> known) {
  if (!Active()) return *this;
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    bool found = false;
    for (auto k : known) {
      if (it.key() == k) {
        found = true;
        break;
      }
    }
    if (!found) return Fail(it.key(), "unknown field");
  }
  return *this;
}

StatusOr<std::vector<int>> IntListFromJson(const json& j, const std::string& path) {
  if (!j.is_array()) {
    return Status::InvalidArgument(path + ": must be an array, got " + JsonTypeName(j));
  }
  std::vector<int> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    int64_t v = 0;
    if (!ToInt64(j[i], &v)) {
      return Status::InvalidArgument(
          IndexPath(path, i) + ": must be an integer, got " +
          (j[i].is_number() ? FormatNumber(j[i].get<double>()) : JsonTypeName(j[i])));
    }
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
      return Status::InvalidArgument(IndexPath(path, i) + ": must fit in a 32-bit integer, got " +
                                     std::to_string(v));
    }
    out.push_back(static_cast<int>(v));
  }
  return out;
}

}  // namespace star::api
