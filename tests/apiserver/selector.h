// Label and field selectors of list and watch requests (?labelSelector=, ?fieldSelector=).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "star/core/status.h"

namespace star::apiserver {

// A label selector: comma-separated requirements, all of which must hold:
//   key=value, key==value, key!=value, key in (a,b), key notin (a,b), key, !key.
// An empty selector matches everything.
class LabelSelector {
 public:
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist };
  struct Requirement {
    std::string key;
    Op op = Op::kExists;
    std::vector<std::string> values;
  };

  // InvalidArgument names the offending part of `text`.
  static StatusOr<LabelSelector> Parse(std::string_view text);

  // `labels` is metadata.labels (an object, or null when absent).
  bool Matches(const nlohmann::json& labels) const;
  // Matches the labels of an object.
  bool MatchesObject(const nlohmann::json& object) const;
  bool empty() const { return requirements_.empty(); }
  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
};

// A field selector: comma-separated `path=value`, `path==value` or `path!=value`, where
// path is a dotted field path (metadata.name, metadata.namespace, involvedObject.uid,
// status.phase, ...). A missing field reads as "". Backslash escapes `,`, `=` and `\`.
class FieldSelector {
 public:
  struct Requirement {
    std::string path;
    bool equals = true;
    std::string value;
  };

  static StatusOr<FieldSelector> Parse(std::string_view text);

  bool Matches(const nlohmann::json& object) const;
  bool empty() const { return requirements_.empty(); }

 private:
  std::vector<Requirement> requirements_;
};

// The field at a dotted path as a selector compares it: strings as they are, other
// scalars as JSON text, missing fields as "".
std::string FieldValue(const nlohmann::json& object, std::string_view path);

}  // namespace star::apiserver
