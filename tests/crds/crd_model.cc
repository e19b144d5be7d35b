#include "crd_model.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <regex>
#include <set>

namespace star::crds {

using nlohmann::json;

// ---- YAML ----

namespace {

bool IsOneOf(const std::string& s, std::initializer_list<std::string_view> options) {
  return std::find(options.begin(), options.end(), s) != options.end();
}

// A plain scalar as go-yaml v2 resolves it (the subset the CRDs can contain).
json PlainScalar(const std::string& s) {
  if (IsOneOf(s, {"", "~", "null", "Null", "NULL"})) return nullptr;
  if (IsOneOf(s, {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"})) {
    return true;
  }
  if (IsOneOf(s, {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"})) {
    return false;
  }
  static const std::regex kInt("^[-+]?[0-9]+$");
  static const std::regex kFloat("^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$");
  if (std::regex_match(s, kInt)) {
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    int64_t v = 0;
    auto [end, ec] = std::from_chars(begin, s.data() + s.size(), v);
    if (ec == std::errc() && end == s.data() + s.size()) return v;
    uint64_t u = 0;
    auto [uend, uec] = std::from_chars(begin, s.data() + s.size(), u);
    if (uec == std::errc() && uend == s.data() + s.size()) return u;
    return std::strtod(s.c_str(), nullptr);
  }
  if (std::regex_match(s, kFloat)) return std::strtod(s.c_str(), nullptr);
  return s;
}

json YamlToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      // yaml-cpp tags a plain scalar "?" and a quoted one "!".
      return n.Tag() == "?" ? PlainScalar(n.Scalar()) : json(n.Scalar());
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(YamlToJson(e));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = YamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return nullptr;
}

const json& NullJson() {
  static const json kNull;
  return kNull;
}

}  // namespace

StatusOr<json> LoadYamlAsJson(const std::string& file) {
  try {
    return YamlToJson(YAML::LoadFile(file));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(file + ": " + e.what());
  }
}

StatusOr<json> LoadCrd(std::string_view file) {
  return LoadYamlAsJson(std::string(STAR_CRDS_DIR) + "/" + std::string(file));
}

const json& CrdVersion(const json& crd) {
  const json* versions = Find(crd, ParsePath("spec.versions"));
  if (versions == nullptr || !versions->is_array() || versions->size() != 1) return NullJson();
  return (*versions)[0];
}

const json& OpenApiSchema(const json& crd) {
  const json* s = Find(CrdVersion(crd), ParsePath("schema.openAPIV3Schema"));
  return s == nullptr ? NullJson() : *s;
}

// ---- paths ----

Path Child(Path p, std::string key) {
  p.push_back(PathStep{std::move(key), 0, false});
  return p;
}

Path Item(Path p, size_t index) {
  p.push_back(PathStep{"", index, true});
  return p;
}

Path ParsePath(std::string_view s) {
  Path p;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '.') {
      ++i;
    } else if (s[i] == '[') {
      const size_t close = s.find(']', i);
      size_t index = 0;
      std::from_chars(s.data() + i + 1, s.data() + close, index);
      p = Item(std::move(p), index);
      i = close + 1;
    } else {
      const size_t end = s.find_first_of(".[", i);
      p = Child(std::move(p), std::string(s.substr(i, end - i)));
      i = end == std::string_view::npos ? s.size() : end;
    }
  }
  return p;
}

std::string ToString(const Path& p, bool wildcard) {
  std::string out;
  for (const PathStep& step : p) {
    if (step.is_index) {
      out += wildcard ? "[*]" : "[" + std::to_string(step.index) + "]";
    } else {
      if (!out.empty()) out += '.';
      out += step.key;
    }
  }
  return out;
}

const json* Find(const json& doc, const Path& p) {
  const json* at = &doc;
  for (const PathStep& step : p) {
    if (step.is_index) {
      if (!at->is_array() || step.index >= at->size()) return nullptr;
      at = &(*at)[step.index];
    } else {
      if (!at->is_object()) return nullptr;
      auto it = at->find(step.key);
      if (it == at->end()) return nullptr;
      at = &*it;
    }
  }
  return at;
}

void Set(json& doc, const Path& p, json value) {
  json* at = &doc;
  for (const PathStep& step : p) {
    at = step.is_index ? &(*at)[step.index] : &(*at)[step.key];
  }
  *at = std::move(value);
}

bool Erase(json& doc, const Path& p) {
  if (p.empty()) return false;
  Path parent_path(p.begin(), p.end() - 1);
  json* parent = const_cast<json*>(Find(doc, parent_path));
  if (parent == nullptr) return false;
  const PathStep& last = p.back();
  if (last.is_index) {
    if (!parent->is_array() || last.index >= parent->size()) return false;
    parent->erase(last.index);
    return true;
  }
  return parent->is_object() && parent->erase(last.key) > 0;
}

// ---- the schema ----

bool IsServerOwned(const Path& p) {
  if (p.empty() || p[0].is_index) return false;
  return p[0].key == "metadata" ||
         (p.size() == 1 && (p[0].key == "apiVersion" || p[0].key == "kind"));
}

bool PreservesUnknown(const json& schema) {
  return schema.value("x-kubernetes-preserve-unknown-fields", false);
}

namespace {

void WalkInto(const json& schema, const Path& path, std::vector<SchemaNode>* out) {
  if (schema.contains("properties")) {
    std::set<std::string> required;
    if (schema.contains("required")) {
      for (const json& r : schema["required"]) required.insert(r.get<std::string>());
    }
    for (const auto& [key, sub] : schema["properties"].items()) {
      Path child = Child(path, key);
      out->push_back(SchemaNode{child, &sub, required.count(key) > 0, IsServerOwned(child)});
      WalkInto(sub, child, out);
    }
  }
  if (schema.contains("items")) {
    Path item = Item(path, 0);
    out->push_back(SchemaNode{item, &schema["items"], false, IsServerOwned(item)});
    WalkInto(schema["items"], item, out);
  }
}

}  // namespace

std::vector<SchemaNode> Walk(const json& schema) {
  std::vector<SchemaNode> out;
  WalkInto(schema, {}, &out);
  return out;
}

const json* SchemaAt(const json& schema, const Path& p) {
  const json* at = &schema;
  for (const PathStep& step : p) {
    const json* next = nullptr;
    if (step.is_index) {
      if (at->contains("items")) next = &(*at)["items"];
    } else if (at->contains("properties") && (*at)["properties"].contains(step.key)) {
      next = &(*at)["properties"][step.key];
    }
    if (next == nullptr) return nullptr;
    at = next;
  }
  return at;
}

void ApplyDefaults(const json& schema, json& value) {
  if (value.is_object() && schema.contains("properties")) {
    for (const auto& [key, sub] : schema["properties"].items()) {
      if (!value.contains(key) && sub.contains("default")) value[key] = sub["default"];
      if (value.contains(key)) ApplyDefaults(sub, value[key]);
    }
  }
  if (value.is_array() && schema.contains("items")) {
    for (json& e : value) ApplyDefaults(schema["items"], e);
  }
}

std::string OpenApiType(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::string:
      return "string";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float: {
      const double d = v.get<double>();
      return std::isfinite(d) && std::floor(d) == d ? "integer" : "number";
    }
    default:
      return "null";
  }
}

std::string_view ExpectName(Expect e) {
  switch (e) {
    case Expect::kValid:
      return "valid";
    case Expect::kInvalid:
      return "invalid";
    case Expect::kPruned:
      return "pruned by the server, rejected by C++";
    case Expect::kCrossField:
      return "violates a cross-field (CEL) rule";
  }
  return "?";
}

// ---- generated cases ----

namespace {

// The name of an unknown field the cases add.
constexpr std::string_view kUnknownField = "zzUnknownField";

class Generator {
 public:
  Generator(const json& schema, const KindModel& model, std::vector<std::string>* errors)
      : schema_(schema), model_(model), errors_(errors) {
    CollectEnumValues(schema_);
    for (const std::string& name : model_.cpp_enum_names) AddEnumSpellings(name);
  }

  std::vector<Case> Run() {
    Add("the complete example", model_.example, Expect::kValid, {}, "", model_.example);
    for (const SchemaNode& node : Walk(schema_)) {
      const json& s = *node.schema;
      const std::string type = s.value("type", "");
      if (s.contains("enum")) Enums(node);
      if (type == "integer" || type == "number") Bounds(node, type == "integer");
      if (type == "string") Strings(node);
      if (!type.empty()) WrongTypes(node, type);
      if (!node.server_owned && !node.path.back().is_index) Removal(node);
      if (type == "object" && !node.server_owned && !PreservesUnknown(s)) Unknown(node.path);
      if (type == "array") Duplicates(node);
      if (type == "array" && s.contains("maxItems")) MaxItems(node);
    }
    Unknown({});
    for (const auto& [path, doc] : model_.cross_field_violations) {
      Add("cross-field rule on " + path, doc, Expect::kCrossField, ParsePath(path));
    }
    return std::move(cases_);
  }

 private:
  // Adds a case. Accepted cases are first repaired around `field` so the rest of the
  // document keeps the cross-field rules; rejected ones are left as they are so the
  // C++ error can only be about `field`.
  void Add(std::string name, json doc, Expect expect, Path field, std::string suffix = "",
           std::optional<json> written = std::nullopt, bool written_absent = false) {
    if (expect == Expect::kValid && !field.empty()) model_.repair(doc, field);
    Case c;
    c.name = std::move(name);
    c.doc = std::move(doc);
    c.expect = expect;
    c.field = std::move(field);
    c.message_suffix = std::move(suffix);
    if (written_absent) {
      c.written = Case::Written::kAbsent;
    } else if (written) {
      c.written = Case::Written::kValue;
      c.written_value = *std::move(written);
    }
    cases_.push_back(std::move(c));
  }

  // The example with `value` at `path`.
  json With(const Path& path, json value) const {
    json doc = model_.example;
    Set(doc, path, std::move(value));
    return doc;
  }

  void CollectEnumValues(const json& s) {
    if (s.is_object()) {
      if (s.contains("enum")) {
        for (const json& v : s["enum"]) AddEnumSpellings(v.get<std::string>());
      }
      for (const auto& [key, sub] : s.items()) {
        if (key != "enum" && key != "default") CollectEnumValues(sub);
      }
    } else if (s.is_array()) {
      for (const json& sub : s) CollectEnumValues(sub);
    }
  }

  // `name`, and its all-lowercase and all-uppercase spellings.
  void AddEnumSpellings(const std::string& name) {
    std::string lower = name, upper = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return std::toupper(c); });
    enum_pool_.insert({name, lower, upper});
  }

  // Every value any enum of the schema or of C++ names, in three spellings, is accepted
  // exactly where this enum lists it.
  void Enums(const SchemaNode& node) {
    std::set<std::string> allowed;
    for (const json& v : (*node.schema)["enum"]) allowed.insert(v.get<std::string>());
    std::set<std::string> pool = enum_pool_;
    pool.insert({"", "Bogus"});
    const std::string at = ToString(node.path);
    for (const std::string& v : pool) {
      const bool ok = allowed.count(v) > 0;
      Add("enum " + at + " = \"" + v + "\"", With(node.path, v),
          ok ? Expect::kValid : Expect::kInvalid, node.path, "",
          ok ? std::optional<json>(v) : std::nullopt);
    }
  }

  void Bounds(const SchemaNode& node, bool integer) {
    const json& s = *node.schema;
    const std::string at = ToString(node.path);
    if (integer && !s.contains("maximum")) {
      // No maximum: C++ must not read it into 32 bits.
      constexpr int64_t kAboveInt32 = int64_t{1} << 31;
      Add("wide integer " + at + " = " + std::to_string(kAboveInt32), With(node.path, kAboveInt32),
          Expect::kValid, node.path, "", json(kAboveInt32));
    }
    for (const bool lower : {true, false}) {
      const char* key = lower ? "minimum" : "maximum";
      if (!s.contains(key)) continue;
      const bool exclusive = s.value(lower ? "exclusiveMinimum" : "exclusiveMaximum", false);
      const std::string what = std::string(key) + (exclusive ? " (exclusive) " : " ") + at;
      if (integer) {
        const int64_t bound = s[key].get<int64_t>();
        const int64_t inside = exclusive ? (lower ? bound + 1 : bound - 1) : bound;
        Add(what + " = " + std::to_string(inside), With(node.path, inside), Expect::kValid,
            node.path, "", json(inside));
        const int64_t outside = exclusive ? bound : (lower ? bound - 1 : bound + 1);
        const bool representable =
            exclusive || (lower ? bound != std::numeric_limits<int64_t>::min()
                                : bound != std::numeric_limits<int64_t>::max());
        if (representable) {
          Add(what + " = " + std::to_string(outside), With(node.path, outside), Expect::kInvalid,
              node.path);
        }
      } else {
        const double bound = s[key].get<double>();
        const double away = lower ? -std::numeric_limits<double>::infinity()
                                  : std::numeric_limits<double>::infinity();
        const double inside = exclusive ? std::nextafter(bound, -away) : bound;
        const double outside = exclusive ? bound : std::nextafter(bound, away);
        Add(what + " = " + json(inside).dump(), With(node.path, inside), Expect::kValid, node.path,
            "", json(inside));
        Add(what + " = " + json(outside).dump(), With(node.path, outside), Expect::kInvalid,
            node.path);
      }
    }
  }

  // maxItems: a list of exactly that many items is accepted, one more is rejected. The
  // items are copies of the example's first item (or of a minimal one) with their
  // list-map keys made unique.
  void MaxItems(const SchemaNode& node) {
    const json& s = *node.schema;
    const std::string at = ToString(node.path);
    const size_t bound = s["maxItems"].get<size_t>();
    const json* current = Find(model_.example, node.path);
    if (current == nullptr || !current->is_array() || current->empty()) {
      errors_->push_back(at + ": the example needs an item to probe maxItems");
      return;
    }
    std::vector<std::string> keys;
    if (s.contains("x-kubernetes-list-map-keys")) {
      for (const json& k : s["x-kubernetes-list-map-keys"]) keys.push_back(k.get<std::string>());
    }
    const auto list_of = [&](size_t n) {
      json list = json::array();
      for (size_t i = 0; i < n; ++i) {
        json item = current->front();
        for (const std::string& k : keys) item[k] = item[k].get<std::string>() + std::to_string(i);
        list.push_back(std::move(item));
      }
      return list;
    };
    Add("maxItems " + at + " = " + std::to_string(bound) + " items",
        With(node.path, list_of(bound)), Expect::kValid, node.path);
    Add("maxItems " + at + " = " + std::to_string(bound + 1) + " items",
        With(node.path, list_of(bound + 1)), Expect::kInvalid, node.path,
        "must have at most " + std::to_string(bound) + " items, got " + std::to_string(bound + 1));
  }

  // A string of exactly `length` characters that matches `pattern` (when set): all 'a',
  // or dot-separated runs of 'a' (for DNS subdomains); nullopt when neither matches.
  static std::optional<std::string> StringOfLength(size_t length, const std::regex* pattern) {
    std::string dotted(length, 'a');
    for (size_t i = 61; i + 1 < length; i += 62) dotted[i] = '.';
    for (const std::string& s : {std::string(length, 'a'), dotted}) {
      if (pattern == nullptr || std::regex_search(s, *pattern)) return s;
    }
    return std::nullopt;
  }

  void Strings(const SchemaNode& node) {
    const json& s = *node.schema;
    const std::string at = ToString(node.path);
    std::optional<std::regex> pattern;
    if (s.contains("pattern")) pattern.emplace(s["pattern"].get<std::string>());
    const std::regex* re = pattern ? &*pattern : nullptr;
    const size_t min_len = s.value("minLength", size_t{0});
    const size_t max_len = s.value("maxLength", std::numeric_limits<size_t>::max());

    for (const bool lower : {true, false}) {
      const char* key = lower ? "minLength" : "maxLength";
      if (!s.contains(key)) continue;
      const size_t bound = s[key].get<size_t>();
      const std::optional<std::string> inside = StringOfLength(bound, re);
      if (!inside) {
        errors_->push_back(at + ": no string of length " + std::to_string(bound) +
                           " matches its pattern");
        continue;
      }
      Add(std::string(key) + " " + at + " = " + std::to_string(bound) + " characters",
          With(node.path, *inside), Expect::kValid, node.path, "", json(*inside));
      if (lower && bound == 0) continue;
      const size_t out_len = lower ? bound - 1 : bound + 1;
      const std::string outside = StringOfLength(out_len, re).value_or(std::string(out_len, 'a'));
      Add(std::string(key) + " " + at + " = " + std::to_string(out_len) + " characters",
          With(node.path, outside), Expect::kInvalid, node.path);
    }

    if (pattern) {
      // The pattern alone decides each probe (lengths within the bounds): a valid probe
      // is written back as it was.
      const std::string l63(63, 'l');
      const std::vector<std::string> probes = {"a",
                                               "0",
                                               "a-0",
                                               "abc-def",
                                               "a.b",
                                               "a.b.c",
                                               "1.2.3.4",
                                               "A",
                                               "aB",
                                               "-a",
                                               "a-",
                                               "a_b",
                                               "a b",
                                               "",
                                               ".",
                                               "a.",
                                               ".a",
                                               "a..b",
                                               "a.-b",
                                               "a-.b",
                                               "\xc3\xa4",
                                               l63,
                                               l63 + ".b",
                                               "l" + l63 + ".b",
                                               "a." + l63 + "l"};
      for (const std::string& p : probes) {
        if (p.size() < min_len || p.size() > max_len) continue;
        const bool ok = std::regex_search(p, *pattern);
        Add("pattern " + at + " = \"" + p + "\"", With(node.path, p),
            ok ? Expect::kValid : Expect::kInvalid, node.path, "",
            ok ? std::optional<json>(p) : std::nullopt);
      }
    }

    if (s.value("format", "") == "date-time") {
      // What the API server's date-time format (RFC 3339) accepts. C++ differs only on
      // leap seconds and impossible days (see the CRD's header), which are not probed.
      const std::vector<std::pair<std::string, bool>> probes = {
          {"2024-05-01T12:30:00Z", true},
          {"2024-05-01T12:30:00.123456Z", true},
          {"2024-05-01T12:30:00+02:00", true},
          {"2024-05-01t12:30:00z", true},
          {"2024-05-01T12:30:00-07:30", true},
          {"2024-05-01 12:30:00Z", false},
          {"2024-05-01", false},
          {"12:30:00Z", false},
          {"2024-13-01T12:30:00Z", false},
          {"2024-05-01T24:30:00Z", false},
          {"2024-05-01T12:30:00", false},
          {"yesterday", false},
          {"", false}};
      for (const auto& [p, ok] : probes) {
        Add("date-time " + at + " = \"" + p + "\"", With(node.path, p),
            ok ? Expect::kValid : Expect::kInvalid, node.path, "",
            ok ? std::optional<json>(p) : std::nullopt);
      }
    }
  }

  void WrongTypes(const SchemaNode& node, const std::string& type) {
    std::vector<json> wrong;
    if (type == "integer") wrong = {"1", 1.5, true};
    if (type == "number") wrong = {"1", true};
    if (type == "string") wrong = {1, true};
    if (type == "boolean") wrong = {"true", 1};
    if (type == "object") wrong = {"x", json::array()};
    if (type == "array") wrong = {"x", json::object()};
    const std::string at = ToString(node.path);
    for (const json& v : wrong) {
      Add("type " + at + " (" + type + ") = " + v.dump(), With(node.path, v), Expect::kInvalid,
          node.path);
    }
  }

  // A required field removed is rejected; an optional one is accepted and takes the
  // schema's default (with the defaults under it), or stays absent when it has none.
  void Removal(const SchemaNode& node) {
    const std::string at = ToString(node.path);
    json doc = model_.example;
    Erase(doc, node.path);
    if (node.required) {
      Add("required " + at + " removed", std::move(doc), Expect::kInvalid, node.path,
          "required field is missing");
      return;
    }
    if (!node.schema->contains("default")) {
      Add("optional " + at + " removed", std::move(doc), Expect::kValid, node.path, "",
          std::nullopt, /*written_absent=*/true);
      return;
    }
    json defaulted = (*node.schema)["default"];
    ApplyDefaults(*node.schema, defaulted);
    Add("optional " + at + " removed", std::move(doc), Expect::kValid, node.path, "",
        std::move(defaulted));
  }

  void Unknown(const Path& object) {
    const Path field = Child(object, std::string(kUnknownField));
    Add("unknown field " + ToString(field), With(field, 1), Expect::kPruned, field,
        "unknown field");
  }

  // An array's element duplicated: rejected for a list-map (same key), accepted for
  // other lists, and for a list-map whose duplicate has a key of its own.
  void Duplicates(const SchemaNode& node) {
    const json* list = Find(model_.example, node.path);
    if (list == nullptr || !list->is_array() || list->empty()) {
      errors_->push_back(ToString(node.path) + ": the example needs an element here");
      return;
    }
    const std::string at = ToString(node.path);
    json doc = model_.example;
    Set(doc, Item(node.path, list->size()), (*list)[0]);
    const json& s = *node.schema;
    if (s.value("x-kubernetes-list-type", "") != "map") {
      json written = *Find(doc, node.path);
      Add("duplicate element in " + at, std::move(doc), Expect::kValid, node.path, "",
          std::move(written));
      return;
    }
    for (const json& key : s["x-kubernetes-list-map-keys"]) {
      const Path dup_key = Child(Item(node.path, list->size()), key.get<std::string>());
      Add("duplicate key " + key.get<std::string>() + " in list-map " + at, doc, Expect::kInvalid,
          dup_key, "duplicate of " + ToString(Item(node.path, 0)));
      json distinct = doc;
      Set(distinct, dup_key, Find(doc, dup_key)->get<std::string>() + "-2");
      json written = *Find(distinct, node.path);
      Add("distinct key " + key.get<std::string>() + " in list-map " + at, std::move(distinct),
          Expect::kValid, node.path, "", std::move(written));
    }
  }

  const json& schema_;
  const KindModel& model_;
  std::vector<std::string>* errors_;
  std::set<std::string> enum_pool_;
  std::vector<Case> cases_;
};

}  // namespace

std::vector<Case> GenerateCases(const json& schema, const KindModel& model,
                                std::vector<std::string>* errors) {
  return Generator(schema, model, errors).Run();
}

}  // namespace star::crds
