#include "schema.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>

namespace star::apiserver {
namespace {

// Patterns longer than this are not checked: std::regex's compiler recurses once per
// nested group, and a request body can hold a pattern nested a million deep.
constexpr size_t kMaxPatternLength = 1024;
// Strings longer than this are not matched against a pattern but refused (422 Too
// long): even without backtracking, a search costs up to length squared.
constexpr size_t kMaxPatternSubject = 64 * 1024;

// Each schema pattern compiled once (compiling dominated validating large objects);
// nullptr for a pattern std::regex cannot compile or that is too long. Compiled in
// libstdc++'s polynomial mode: matching walks the input in a loop instead of recursing
// once per character (which overflows the stack on strings of ~100k characters) and
// never backtracks exponentially; back-references, which RE2 lacks too, do not compile.
// Thread-safe; entries are never removed.
const std::regex* CompiledPattern(const std::string& pattern) {
  if (pattern.size() > kMaxPatternLength) return nullptr;
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<std::regex>> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(pattern);
  if (it == cache.end()) {
    std::unique_ptr<std::regex> re;
    try {
      re = std::make_unique<std::regex>(pattern, std::regex::ECMAScript | std::regex_constants::__polynomial);
    } catch (const std::regex_error&) {
    }
    it = cache.emplace(pattern, std::move(re)).first;
  }
  return it->second.get();
}

using nlohmann::json;

const json* Find(const json& schema, const char* key) {
  if (!schema.is_object()) return nullptr;
  auto it = schema.find(key);
  return it == schema.end() ? nullptr : &*it;
}

bool Flag(const json& schema, const char* key) {
  const json* v = Find(schema, key);
  return v != nullptr && v->is_boolean() && v->get<bool>();
}

std::string Quote(const std::string& s) { return json(s).dump(); }

// A schema's count bound (maxLength, minItems, ...): nullopt unless a non-negative
// integer.
std::optional<size_t> Bound(const json& schema, const char* key) {
  const json* v = Find(schema, key);
  if (v == nullptr || !v->is_number_integer() || v->get<std::int64_t>() < 0) return std::nullopt;
  return v->get<size_t>();
}

// The schema's "type" ("" when absent or not a string).
std::string TypeOf(const json& schema) {
  const json* v = Find(schema, "type");
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

// A number as Go's %v prints it (close enough for the bounds in messages).
std::string FormatNumber(const json& v) {
  if (v.is_number_integer()) return v.dump();
  const double d = v.get<double>();
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e6) {
    return std::to_string(static_cast<long long>(d));
  }
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  return buf;
}

// A bad value as the server's field.Error prints it.
std::string FormatValue(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return Quote(v.get<std::string>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return FormatNumber(v);
    case json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case json::value_t::null:
      return "null";
    default:
      return v.dump();
  }
}

std::string TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    default: return "object";
  }
}

bool IsIntegral(const json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && d == std::floor(d);
}

bool TypeMatches(const std::string& type, const json& v) {
  if (type.empty()) return true;
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "integer") return IsIntegral(v);
  if (type == "number") return v.is_number();
  return true;  // unknown type names are not checked
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string Child(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// ---- pruning ----

void Prune(const json& schema, json& value, bool root) {
  if (!schema.is_object()) return;
  if (value.is_object()) {
    const bool preserve = Flag(schema, "x-kubernetes-preserve-unknown-fields");
    const bool embedded = Flag(schema, "x-kubernetes-embedded-resource");
    const json* props = Find(schema, "properties");
    const json* additional = Find(schema, "additionalProperties");
    for (auto it = value.begin(); it != value.end();) {
      const std::string key = it.key();
      if ((root || embedded) && (key == "apiVersion" || key == "kind" || key == "metadata")) {
        ++it;
        continue;
      }
      const json* sub = nullptr;
      if (props != nullptr && props->is_object() && props->contains(key)) {
        sub = &(*props)[key];
      } else if (additional != nullptr && additional->is_object()) {
        sub = additional;
      }
      if (sub != nullptr) {
        if (it->is_null() && !Flag(*sub, "nullable")) {
          it = value.erase(it);
          continue;
        }
        Prune(*sub, *it, false);
        ++it;
      } else if (preserve || (additional != nullptr && additional->is_boolean() &&
                              additional->get<bool>())) {
        ++it;
      } else {
        it = value.erase(it);
      }
    }
  } else if (value.is_array()) {
    const json* items = Find(schema, "items");
    if (items == nullptr || !items->is_object()) return;
    for (auto& item : value) Prune(*items, item, false);
  }
}

// ---- defaulting ----

void Default(const json& schema, json& value, bool root) {
  if (!schema.is_object()) return;
  if (value.is_object()) {
    const json* props = Find(schema, "properties");
    if (props != nullptr && props->is_object()) {
      for (const auto& [key, sub] : props->items()) {
        if (root && key == "metadata") continue;
        if (!value.contains(key)) {
          const json* def = Find(sub, "default");
          if (def == nullptr) continue;
          value[key] = *def;
        }
        Default(sub, value[key], false);
      }
    }
    const json* additional = Find(schema, "additionalProperties");
    if (additional != nullptr && additional->is_object()) {
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (props != nullptr && props->is_object() && props->contains(it.key())) continue;
        Default(*additional, *it, false);
      }
    }
  } else if (value.is_array()) {
    const json* items = Find(schema, "items");
    if (items == nullptr || !items->is_object()) return;
    for (auto& item : value) Default(*items, item, false);
  }
}

// ---- validation ----

class Validator {
 public:
  std::vector<SchemaError> errors;

  void Validate(const json& schema, const json& value, const std::string& path, bool root) {
    if (!schema.is_object()) return;
    const std::string type = TypeOf(schema);
    if (value.is_null()) {
      if (Flag(schema, "nullable") || type.empty()) return;
      TypeError(path, type, value);
      return;
    }
    if (Flag(schema, "x-kubernetes-int-or-string")) {
      if (!IsIntegral(value) && !value.is_string()) {
        TypeError(path, "integer,string", value);
        return;
      }
    } else if (!TypeMatches(type, value)) {
      TypeError(path, type, value);
      return;
    }
    if (const json* e = Find(schema, "enum"); e != nullptr && e->is_array()) Enum(*e, value, path);
    if (value.is_string()) String(schema, value, path);
    if (value.is_number()) Number(schema, value, path);
    if (value.is_array()) Array(schema, value, path);
    if (value.is_object()) Object(schema, value, path, root);
    Combinators(schema, value, path);
  }

 private:
  void Add(const std::string& field, const char* type, std::string message) {
    errors.push_back({field, type, std::move(message)});
  }
  // An Invalid error whose detail is "<path> in body <what>", as kube-openapi writes it.
  void Invalid(const std::string& path, const json& value, const std::string& what) {
    Add(path, "FieldValueInvalid", "Invalid value: " + FormatValue(value) + ": " + path + " in body " + what);
  }
  void TypeError(const std::string& path, const std::string& type, const json& value) {
    const std::string actual = TypeName(value);
    Add(path, "FieldValueTypeInvalid", "Invalid value: " + Quote(actual) + ": " + path +
                                           " in body must be of type " + type + ": " + Quote(actual));
  }

  void Enum(const json& allowed, const json& value, const std::string& path) {
    for (const auto& a : allowed) {
      if (a == value) return;
    }
    std::string list;
    for (const auto& a : allowed) {
      if (!list.empty()) list += ", ";
      list += Quote(a.is_string() ? a.get<std::string>() : a.dump());
    }
    std::string message = "Unsupported value: " + FormatValue(value);
    if (!list.empty()) message += ": supported values: " + list;
    Add(path, "FieldValueNotSupported", std::move(message));
  }

  void String(const json& schema, const json& value, const std::string& path) {
    const std::string& s = value.get_ref<const std::string&>();
    const size_t length = CodePoints(s);
    if (const auto max = Bound(schema, "maxLength"); max && length > *max) {
      Add(path, "FieldValueTooLong", "Too long: may not be longer than " + std::to_string(*max));
    }
    if (const auto min = Bound(schema, "minLength"); min && length < *min) {
      Invalid(path, value, "should be at least " + std::to_string(*min) + " chars long");
    }
    const json* pattern = Find(schema, "pattern");
    if (pattern != nullptr && pattern->is_string() && s.size() > kMaxPatternSubject) {
      Add(path, "FieldValueTooLong",
          "Too long: may not be longer than " + std::to_string(kMaxPatternSubject) + " to be matched against '" +
              pattern->get<std::string>() + "'");
    } else if (pattern != nullptr && pattern->is_string()) {
      // A pattern std::regex cannot compile is not checked (the server uses RE2).
      const std::regex* re = CompiledPattern(pattern->get<std::string>());
      if (re != nullptr && !std::regex_search(s, *re)) {
        Invalid(path, value, "should match '" + pattern->get<std::string>() + "'");
      }
    }
  }

  void Number(const json& schema, const json& value, const std::string& path) {
    const double v = value.get<double>();
    if (const json* min = Find(schema, "minimum"); min != nullptr && min->is_number()) {
      const double m = min->get<double>();
      if (Flag(schema, "exclusiveMinimum")) {
        if (v <= m) Invalid(path, value, "should be greater than " + FormatNumber(*min));
      } else if (v < m) {
        Invalid(path, value, "should be greater than or equal to " + FormatNumber(*min));
      }
    }
    if (const json* max = Find(schema, "maximum"); max != nullptr && max->is_number()) {
      const double m = max->get<double>();
      if (Flag(schema, "exclusiveMaximum")) {
        if (v >= m) Invalid(path, value, "should be less than " + FormatNumber(*max));
      } else if (v > m) {
        Invalid(path, value, "should be less than or equal to " + FormatNumber(*max));
      }
    }
    if (const json* factor = Find(schema, "multipleOf"); factor != nullptr && factor->is_number()) {
      const double f = factor->get<double>();
      if (f > 0) {
        const double q = v / f;
        if (std::fabs(q - std::round(q)) > 1e-9) {
          Invalid(path, value, "should be a multiple of " + FormatNumber(*factor));
        }
      }
    }
  }

  void Array(const json& schema, const json& value, const std::string& path) {
    if (const json* items = Find(schema, "items"); items != nullptr && items->is_object()) {
      for (size_t i = 0; i < value.size(); ++i) {
        Validate(*items, value[i], path + "[" + std::to_string(i) + "]", false);
      }
    }
    const json size = value.size();
    if (const auto max = Bound(schema, "maxItems"); max && value.size() > *max) {
      Add(path, "FieldValueTooMany",
          "Too many: " + size.dump() + ": must have at most " + std::to_string(*max) + " items");
    }
    if (const auto min = Bound(schema, "minItems"); min && value.size() < *min) {
      Invalid(path, size, "should have at least " + std::to_string(*min) + " items");
    }
  }

  void Object(const json& schema, const json& value, const std::string& path, bool root) {
    if (const json* required = Find(schema, "required"); required != nullptr && required->is_array()) {
      for (const auto& key : *required) {
        if (!key.is_string()) continue;
        if (!value.contains(key.get<std::string>())) {
          Add(Child(path, key.get<std::string>()), "FieldValueRequired", "Required value");
        }
      }
    }
    const json* props = Find(schema, "properties");
    const json* additional = Find(schema, "additionalProperties");
    for (const auto& [key, item] : value.items()) {
      const std::string child = Child(path, key);
      if (root && (key == "apiVersion" || key == "kind")) continue;
      if (root && key == "metadata") {
        // Only the name is validated, against metadata.properties.name.
        if (props == nullptr) continue;
        const json* meta = Find(*props, "metadata");
        const json* meta_props = meta == nullptr ? nullptr : Find(*meta, "properties");
        const json* name_schema = meta_props == nullptr ? nullptr : Find(*meta_props, "name");
        if (name_schema != nullptr && item.is_object() && item.contains("name")) {
          Validate(*name_schema, item["name"], "metadata.name", false);
        }
        continue;
      }
      if (props != nullptr && props->is_object() && props->contains(key)) {
        Validate((*props)[key], item, child, false);
      } else if (additional != nullptr && additional->is_object()) {
        Validate(*additional, item, child, false);
      }
    }
    const json count = value.size();
    if (const auto max = Bound(schema, "maxProperties"); max && value.size() > *max) {
      Add(path, "FieldValueTooMany",
          "Too many: " + count.dump() + ": must have at most " + std::to_string(*max) + " items");
    }
    if (const auto min = Bound(schema, "minProperties"); min && value.size() < *min) {
      Invalid(path, count, "should have at least " + std::to_string(*min) + " properties");
    }
  }

  size_t Passing(const json& schemas, const json& value, const std::string& path) {
    size_t passing = 0;
    for (const auto& s : schemas) {
      Validator sub;
      sub.Validate(s, value, path, false);
      if (sub.errors.empty()) ++passing;
    }
    return passing;
  }

  void Combinators(const json& schema, const json& value, const std::string& path) {
    if (const json* all = Find(schema, "allOf"); all != nullptr && all->is_array()) {
      for (const auto& s : *all) Validate(s, value, path, false);
    }
    if (const json* any = Find(schema, "anyOf"); any != nullptr && any->is_array() && !any->empty()) {
      if (Passing(*any, value, path) == 0) {
        Invalid(path, value, "must validate at least one schema (anyOf)");
      }
    }
    if (const json* one = Find(schema, "oneOf"); one != nullptr && one->is_array() && !one->empty()) {
      if (Passing(*one, value, path) != 1) {
        Invalid(path, value, "must validate one and only one schema (oneOf)");
      }
    }
    if (const json* no = Find(schema, "not"); no != nullptr && no->is_object()) {
      if (Passing(json::array({*no}), value, path) == 1) {
        Invalid(path, value, "must not validate the schema (not)");
      }
    }
  }
};

}  // namespace

std::vector<SchemaError> DefaultPruneValidate(const json& open_api_v3_schema, json& object) {
  if (!open_api_v3_schema.is_object()) return {};
  Prune(open_api_v3_schema, object, true);
  Default(open_api_v3_schema, object, true);
  Validator v;
  v.Validate(open_api_v3_schema, object, "", true);
  return std::move(v.errors);
}

std::string FormatSchemaErrors(const std::vector<SchemaError>& errors) {
  std::string out;
  for (const auto& e : errors) {
    if (!out.empty()) out += ", ";
    out += e.field + ": " + e.message;
  }
  return errors.size() > 1 ? "[" + out + "]" : out;
}

}  // namespace star::apiserver
