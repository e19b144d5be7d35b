// YAML to JSON over yaml-cpp, after libyaml's syntax check (syntax.h): the YAML 1.2 core
// schema's scalars, with bounds on depth, size, aliases and the text's UTF-8.
#include "star/yaml/to_json.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <exception>
#include <optional>

#include "star/yaml/syntax.h"

namespace star::yaml {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 512;
constexpr size_t kMaxValues = 1'000'000;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Consumes [0-9]+ at s[*i]; false when there is no digit.
bool Digits(std::string_view s, size_t* i) {
  const size_t from = *i;
  while (*i < s.size() && IsDigit(s[*i])) ++*i;
  return *i > from;
}

// YAML 1.2 core schema int: [-+]?[0-9]+ (decimal only).
bool LooksLikeInt(std::string_view s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  return Digits(s, &i) && i == s.size();
}

// YAML 1.2 core schema float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool LooksLikeFloat(std::string_view s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!Digits(s, &i)) return false;
  } else {
    if (!Digits(s, &i)) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      Digits(s, &i);
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!Digits(s, &i)) return false;
  }
  return i == s.size();
}

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF),
// the only text a JSON value may hold (nlohmann::json::dump throws on anything else).
bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return false;
    }
    if (s.size() - i <= n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return false;
    }
    i += n + 1;
  }
  return true;
}

std::string_view WithoutPlus(std::string_view s) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  return s;
}

// A scalar's JSON value under the rules documented on ToJson (to_json.h).
json ScalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  const std::string& tag = node.Tag();
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return s;  // quoted, block or !!str
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  const std::string_view v = WithoutPlus(s);
  if (LooksLikeInt(s)) {
    int64_t i = 0;
    const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), i);
    if (ec == std::errc() && ptr == v.data() + v.size()) return i;
    // Too large for int64: read it as a number below.
  }
  if (LooksLikeInt(s) || LooksLikeFloat(s)) {
    double d = 0;
    const auto [ptr, ec] =
        std::from_chars(v.data(), v.data() + v.size(), d, std::chars_format::general);
    if (ec == std::errc() && ptr == v.data() + v.size() && std::isfinite(d)) return d;
  }
  return s;
}

// Converts one document, keeping the first error.
class Converter {
 public:
  explicit Converter(const std::string& name) : name_(name) {}

  const Status& status() const { return status_; }

  bool Convert(const YAML::Node& node, int depth, json* out) {
    if (++values_ > kMaxValues) {
      return Fail(node, "more than " + std::to_string(kMaxValues) +
                            " values (aliases expanding too far?)");
    }
    if (depth > kMaxDepth) return Fail(node, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        *out = nullptr;
        return true;
      case YAML::NodeType::Scalar:
        if (!IsUtf8(node.Scalar())) return Fail(node, "not valid UTF-8");
        *out = ScalarToJson(node);
        return true;
      case YAML::NodeType::Sequence: {
        *out = json::array();
        for (const YAML::Node& item : node) {
          json v;
          if (!Convert(item, depth + 1, &v)) return false;
          out->push_back(std::move(v));
        }
        return true;
      }
      case YAML::NodeType::Map: {
        *out = json::object();
        for (const auto& entry : node) {
          const YAML::Node key = entry.first;  // Nodes are handles: copies are cheap
          if (!key.IsScalar()) return Fail(key, "mapping keys must be scalars");
          if (!IsUtf8(key.Scalar())) return Fail(key, "not valid UTF-8");
          if (out->contains(key.Scalar())) return Fail(key, "duplicate key \"" + key.Scalar() + "\"");
          json v;
          if (!Convert(entry.second, depth + 1, &v)) return false;
          (*out)[key.Scalar()] = std::move(v);
        }
        return true;
      }
    }
    return Fail(node, "unsupported YAML node");
  }

 private:
  bool Fail(const YAML::Node& at, const std::string& reason) {
    const YAML::Mark m = at.Mark();
    const std::string where =
        m.is_null() ? name_
                    : name_ + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
    status_ = Status::InvalidArgument(where + ": " + reason);
    return false;
  }

  const std::string& name_;
  Status status_;
  size_t values_ = 0;
};

}  // namespace

StatusOr<std::vector<json>> ToJson(std::string_view text, const std::string& name) {
  STAR_RETURN_IF_ERROR(CheckSyntax(text, name));  // before yaml-cpp: see syntax.h
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return Status::InvalidArgument(name + ": " + e.msg);
    return Status::InvalidArgument(name + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(name + ": cannot parse YAML: " + e.what());
  }
  std::vector<json> out;
  out.reserve(docs.size());
  for (const YAML::Node& d : docs) {
    Converter c(name);
    json j;
    if (!c.Convert(d, 0, &j)) return c.status();
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace star::yaml
