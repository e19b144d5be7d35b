// ObjectReader: validating reads of one JSON object, with field paths in errors.
//
// Every decoder in star::api reads through this class so that errors read the same
// everywhere: "<path>.<field>: <reason>", e.g.
//   "spec.workers.replicas: must be >= 1, got 0"
//   "spec.training.globalBatchSize: required field is missing"
//   "iteration_seconds[2]: must be a number, got string"
// The reader keeps the FIRST error only; later calls are no-ops once it failed, so a
// decoder can read all fields and check status() once at the end.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/status.h"

namespace star::api {

enum class Need { kRequired, kOptional };

// "object", "array", "string", "integer", "number", "boolean" or "null".
std::string JsonTypeName(const nlohmann::json& j);

// Joins a path and a key: ("spec", "workers") -> "spec.workers"; ("", "k") -> "k".
std::string JoinPath(std::string_view path, std::string_view key);
// ("workers", 3) -> "workers[3]".
std::string IndexPath(std::string_view path, size_t index);

class ObjectReader {
 public:
  // `path` names `j` in error messages ("" for the document root). Records an error if
  // `j` is not an object. `j` must outlive the reader.
  ObjectReader(const nlohmann::json& j, std::string path);

  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  const std::string& path() const { return path_; }
  // Full path of a field of this object.
  std::string FieldPath(std::string_view key) const { return JoinPath(path_, key); }

  bool Has(std::string_view key) const;
  // The raw field, or nullptr when absent (or when this reader is not on an object).
  const nlohmann::json* Get(std::string_view key) const;

  // Typed reads. Present with the wrong type -> error. Absent and kRequired -> error.
  // Absent and kOptional -> *out is left unchanged (so it keeps its default).
  // Integers reject fractional numbers and values outside the target type.
  ObjectReader& Int(std::string_view key, int64_t* out, Need need = Need::kRequired);
  ObjectReader& Int(std::string_view key, int* out, Need need = Need::kRequired);
  ObjectReader& Number(std::string_view key, double* out, Need need = Need::kRequired);
  ObjectReader& Bool(std::string_view key, bool* out, Need need = Need::kRequired);
  ObjectReader& String(std::string_view key, std::string* out, Need need = Need::kRequired);
  // A string that must be one of `allowed` (message lists them).
  ObjectReader& Enum(std::string_view key, std::string* out,
                     std::initializer_list<std::string_view> allowed, Need need = Need::kRequired);
  ObjectReader& NumberArray(std::string_view key, std::vector<double>* out,
                            Need need = Need::kRequired);
  ObjectReader& IntArray(std::string_view key, std::vector<int64_t>* out,
                         Need need = Need::kRequired);

  // Range checks on an already-read value (or its default, when the field was absent);
  // they only run while the reader is OK.
  ObjectReader& AtLeast(std::string_view key, double value, double min);
  ObjectReader& AtMost(std::string_view key, double value, double max);
  ObjectReader& Greater(std::string_view key, double value, double bound);
  // Fails when the field `key` is an array of more than `max` items ("<path>.<key>: must
  // have at most <max> items, got <n>"); absent or not an array: no-op (the typed read
  // reports the type). Call before decoding the items, so a huge list costs nothing.
  ObjectReader& MaxItems(std::string_view key, size_t max);

  // Records "<path>.<key>: <reason>" unless an error is already recorded.
  ObjectReader& Fail(std::string_view key, std::string reason);
  // Records an error produced by a nested decoder (its message already has the path).
  ObjectReader& Merge(const Status& nested);
  // Fails on any field not in `known` ("<path>.<field>: unknown field").
  ObjectReader& RejectUnknown(std::initializer_list<std::string_view> known);

 private:
  bool Active() const { return status_.ok() && is_object_; }

  const nlohmann::json& j_;
  std::string path_;
  bool is_object_ = false;
  Status status_;
};

// Formats a double the way messages show numbers (shortest round-trip form).
std::string FormatNumber(double v);

// A JSON array of 32-bit integers; `path` names `j` in errors
// ("groups[1][2]: must be an integer, got 1.5").
StatusOr<std::vector<int>> IntListFromJson(const nlohmann::json& j, const std::string& path);

// Decodes the optional array field `key` of the reader's object with
// `decode(element, element_path) -> StatusOr<T>`; the first element error is recorded in
// the reader. *out is only replaced when every element decoded.
template <typename T, typename Decode>
ObjectReader& ReadArray(ObjectReader& rd, std::string_view key, std::vector<T>* out,
                        Decode decode) {
  const nlohmann::json* f = rd.ok() ? rd.Get(key) : nullptr;
  if (f == nullptr) return rd;
  if (!f->is_array()) return rd.Fail(key, "must be an array, got " + JsonTypeName(*f));
  std::vector<T> v;
  v.reserve(f->size());
  for (size_t i = 0; i < f->size(); ++i) {
    StatusOr<T> e = decode((*f)[i], IndexPath(rd.FieldPath(key), i));
    if (!e.ok()) return rd.Merge(e.status());
    v.push_back(*std::move(e));
  }
  *out = std::move(v);
  return rd;
}

}  // namespace star::api
