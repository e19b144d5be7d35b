// YAML to JSON from libyaml's events, after its syntax check (syntax.h): the YAML 1.2
// core schema's scalars, with bounds on depth, size, aliases and the text's UTF-8.
#include "star/yaml/to_json.h"

#include <yaml.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <unordered_map>

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

// Whether a scalar is a string whatever it reads as: quoted or block scalars without a
// tag, and the tags "!" and !!str. Other tags are read by the scalar's text.
bool IsString(const yaml_event_t& scalar) {
  const auto* tag = reinterpret_cast<const char*>(scalar.data.scalar.tag);
  if (tag == nullptr) return scalar.data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
  return std::string_view(tag) == "!" || std::string_view(tag) == "tag:yaml.org,2002:str";
}

// A scalar's JSON value under the rules documented on ToJson (to_json.h).
json ScalarToJson(const std::string& s, bool is_string) {
  if (is_string) return s;
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

// libyaml's event stream over a text, one event at a time.
class Events {
 public:
  explicit Events(std::string_view text) {
    ok_ = yaml_parser_initialize(&parser_) != 0;
    if (ok_) {
      yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()),
                                   text.size());
    }
  }
  ~Events() {
    Release();
    yaml_parser_delete(&parser_);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;

  // Moves to the next event; false when the parser fails (CheckSyntax has refused such
  // text before).
  bool Next() {
    Release();
    held_ = ok_ && yaml_parser_parse(&parser_, &event_) != 0;
    return held_;
  }
  const yaml_event_t& event() const { return event_; }
  yaml_event_type_t type() const { return event_.type; }

 private:
  void Release() {
    if (held_) yaml_event_delete(&event_);
    held_ = false;
  }

  yaml_parser_t parser_{};
  yaml_event_t event_{};
  bool ok_ = false;
  bool held_ = false;
};

// A node an anchor names: its JSON, how many values it holds, and its text when it is a
// scalar (a mapping key may be an alias of one).
struct Anchored {
  json value;
  size_t values = 0;
  std::optional<std::string> scalar;
};

// Builds each document's JSON from the events, keeping the first error.
class Builder {
 public:
  Builder(std::string_view text, const std::string& name) : events_(text), name_(name) {}

  StatusOr<std::vector<json>> Stream() {
    std::vector<json> docs;
    if (!Next()) return status_;  // STREAM-START
    while (Next() && events_.type() == YAML_DOCUMENT_START_EVENT) {
      anchors_.clear();
      values_ = 0;
      json doc;
      if (!Next() || !Node(0, &doc) || !Next()) return status_;  // the root, DOCUMENT-END
      docs.push_back(std::move(doc));
    }
    if (!status_.ok()) return status_;
    return docs;
  }

 private:
  bool Next() {
    if (events_.Next()) return true;
    if (status_.ok()) status_ = Status::InvalidArgument(name_ + ": malformed YAML");
    return false;
  }

  // The node whose first event is the current one; on return its last event is current.
  bool Node(int depth, json* out) {
    const yaml_event_t& e = events_.event();
    if (depth > kMaxDepth) return Fail(e.start_mark, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (e.type == YAML_ALIAS_EVENT) return Alias(out, nullptr);
    const auto* anchor = reinterpret_cast<const char*>(
        e.type == YAML_SCALAR_EVENT           ? e.data.scalar.anchor
        : e.type == YAML_SEQUENCE_START_EVENT ? e.data.sequence_start.anchor
                                              : e.data.mapping_start.anchor);
    std::optional<std::string> name;
    if (anchor != nullptr) name = anchor;
    const yaml_mark_t at = e.start_mark;  // `e` moves on to the collection's end
    const size_t before = values_;
    std::optional<std::string> text;
    if (!Count(at, 1)) return false;
    bool ok = false;
    if (e.type == YAML_SCALAR_EVENT) {
      ok = Scalar(&text, out);
    } else if (e.type == YAML_SEQUENCE_START_EVENT) {
      ok = Sequence(depth, out);
    } else if (e.type == YAML_MAPPING_START_EVENT) {
      ok = Mapping(depth, out);
    } else {
      ok = Fail(at, "unexpected YAML event");
    }
    if (!ok || !name) return ok;
    // The anchor keeps a copy, counted like an alias's: chains of anchored nodes stay bounded.
    const size_t values = values_ - before;
    if (!Count(at, values)) return false;
    anchors_[*name] = Anchored{*out, values, std::move(text)};
    return true;
  }

  bool Scalar(std::optional<std::string>* text, json* out) {
    const yaml_event_t& e = events_.event();
    std::string s(reinterpret_cast<const char*>(e.data.scalar.value), e.data.scalar.length);
    if (!IsUtf8(s)) return Fail(e.start_mark, "not valid UTF-8");
    *out = ScalarToJson(s, IsString(e));
    *text = std::move(s);
    return true;
  }

  // An alias: a copy of the node its anchor names, counted again. `key`, when given,
  // receives the anchored scalar's text (an alias used as a mapping key).
  bool Alias(json* out, std::string* key) {
    const yaml_event_t& e = events_.event();
    const std::string name = reinterpret_cast<const char*>(e.data.alias.anchor);
    const auto it = anchors_.find(name);
    if (it == anchors_.end()) return Fail(e.start_mark, "unknown anchor \"" + name + "\"");
    if (key != nullptr) {
      if (!it->second.scalar) return Fail(e.start_mark, "mapping keys must be scalars");
      *key = *it->second.scalar;
      return true;
    }
    if (!Count(e.start_mark, it->second.values)) return false;
    *out = it->second.value;
    return true;
  }

  bool Sequence(int depth, json* out) {
    *out = json::array();
    while (Next() && events_.type() != YAML_SEQUENCE_END_EVENT) {
      json v;
      if (!Node(depth + 1, &v)) return false;
      out->push_back(std::move(v));
    }
    return status_.ok();
  }

  bool Mapping(int depth, json* out) {
    *out = json::object();
    while (Next() && events_.type() != YAML_MAPPING_END_EVENT) {
      const yaml_mark_t at = events_.event().start_mark;
      std::string key;
      if (!Key(&key)) return false;
      if (out->contains(key)) return Fail(at, "duplicate key \"" + key + "\"");
      json v;
      if (!Next() || !Node(depth + 1, &v)) return false;
      (*out)[key] = std::move(v);
    }
    return status_.ok();
  }

  // A mapping key: a scalar's text (or an alias of one), registered when anchored.
  bool Key(std::string* key) {
    const yaml_event_t& e = events_.event();
    if (e.type == YAML_ALIAS_EVENT) return Alias(nullptr, key);
    if (e.type != YAML_SCALAR_EVENT) return Fail(e.start_mark, "mapping keys must be scalars");
    std::optional<std::string> text;
    json value;
    if (!Scalar(&text, &value)) return false;
    *key = *text;
    if (e.data.scalar.anchor != nullptr) {
      anchors_[reinterpret_cast<const char*>(e.data.scalar.anchor)] = Anchored{value, 1, text};
    }
    return true;
  }

  // Adds n values to the document's count; fails past kMaxValues.
  bool Count(const yaml_mark_t& at, size_t n) {
    values_ += n;
    if (values_ <= kMaxValues) return true;
    return Fail(at, "more than " + std::to_string(kMaxValues) + " values (aliases expanding too far?)");
  }

  bool Fail(const yaml_mark_t& at, const std::string& reason) {
    status_ = Status::InvalidArgument(name_ + ":" + std::to_string(at.line + 1) + ":" +
                                      std::to_string(at.column + 1) + ": " + reason);
    return false;
  }

  Events events_;
  const std::string& name_;
  Status status_;
  std::unordered_map<std::string, Anchored> anchors_;
  size_t values_ = 0;
};

}  // namespace

StatusOr<std::vector<json>> ToJson(std::string_view text, const std::string& name) {
  STAR_RETURN_IF_ERROR(CheckSyntax(text, name));  // positions of syntax errors
  return Builder(text, name).Stream();
}

}  // namespace star::yaml
