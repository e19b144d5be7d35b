#include "yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <limits>
#include <regex>

#include "request_limits.h"
#include "star/yaml/syntax.h"

namespace star::apiserver {
namespace {

using nlohmann::json;

// Resolves a plain (unquoted) scalar as the YAML 1.2 core schema does.
json ResolvePlainScalar(const std::string& s) {
  static const std::regex kNull("^(~|null|Null|NULL|)$");
  static const std::regex kTrue("^(true|True|TRUE)$");
  static const std::regex kFalse("^(false|False|FALSE)$");
  static const std::regex kInt("^[-+]?[0-9]+$");
  static const std::regex kOct("^0o[0-7]+$");
  static const std::regex kHex("^0x[0-9a-fA-F]+$");
  static const std::regex kFloat(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  static const std::regex kInf(R"(^[-+]?\.(inf|Inf|INF)$)");
  static const std::regex kNan(R"(^\.(nan|NaN|NAN)$)");
  if (std::regex_match(s, kNull)) return nullptr;
  if (std::regex_match(s, kTrue)) return true;
  if (std::regex_match(s, kFalse)) return false;
  try {
    if (std::regex_match(s, kInt)) {
      if (s[0] == '-') return static_cast<std::int64_t>(std::stoll(s));
      const unsigned long long v = std::stoull(s[0] == '+' ? s.substr(1) : s);
      if (v <= static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max())) {
        return static_cast<std::int64_t>(v);
      }
      return static_cast<std::uint64_t>(v);
    }
    if (std::regex_match(s, kOct)) return static_cast<std::int64_t>(std::stoll(s.substr(2), nullptr, 8));
    if (std::regex_match(s, kHex)) return static_cast<std::int64_t>(std::stoll(s.substr(2), nullptr, 16));
    if (std::regex_match(s, kFloat)) return std::stod(s);
  } catch (const std::out_of_range&) {
    return s;  // too large for a number: keep the text
  }
  if (std::regex_match(s, kInf)) {
    return s[0] == '-' ? -std::numeric_limits<double>::infinity()
                       : std::numeric_limits<double>::infinity();
  }
  if (std::regex_match(s, kNan)) return std::numeric_limits<double>::quiet_NaN();
  return s;
}

// Plain scalars longer than this stay strings without being matched against the
// patterns above (std::regex recurses once per character: a long digit string would
// overflow the stack). No null, boolean or number of the core schema is this long.
constexpr size_t kMaxResolvedScalar = 256;

// YAML nodes to JSON, at most kMaxDepth deep and at most `budget` nodes in all: aliases
// repeat what they name, and nested aliases ("billion laughs") would otherwise expand a
// small document without bound.
class Converter {
 public:
  explicit Converter(size_t budget) : budget_(budget) {}

  StatusOr<json> ToJson(const YAML::Node& node, int depth) {
    if (budget_ == 0) return Status::InvalidArgument("yaml: document contains excessive aliasing");
    --budget_;
    switch (node.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        return json(nullptr);
      case YAML::NodeType::Scalar:
        // "?" is the tag of a plain scalar; quoted ones carry "!" and stay strings.
        if (node.Tag() == "?" && node.Scalar().size() <= kMaxResolvedScalar) return ResolvePlainScalar(node.Scalar());
        return json(node.Scalar());
      case YAML::NodeType::Sequence:
      case YAML::NodeType::Map:
        break;
    }
    if (depth >= kMaxDepth) return Status::InvalidArgument(TooDeepMessage());
    json out = node.IsSequence() ? json::array() : json::object();
    for (const auto& item : node) {
      if (node.IsSequence()) {
        STAR_ASSIGN_OR_RETURN(json value, ToJson(item, depth + 1));
        out.push_back(std::move(value));
      } else {
        STAR_ASSIGN_OR_RETURN(json value, ToJson(item.second, depth + 1));
        out[item.first.as<std::string>()] = std::move(value);
      }
    }
    return out;
  }

 private:
  size_t budget_;
};

void Emit(YAML::Emitter& out, const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [k, item] : v.items()) {
        out << YAML::Key << k << YAML::Value;
        Emit(out, item);
      }
      out << YAML::EndMap;
      break;
    case json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& item : v) Emit(out, item);
      out << YAML::EndSeq;
      break;
    case json::value_t::string:
      out << v.get<std::string>();
      break;
    case json::value_t::null:
      out << YAML::Null;
      break;
    default:
      out << v.dump();
      break;
  }
}

}  // namespace

StatusOr<std::vector<json>> ParseYamlDocuments(const std::string& text) {
  // yaml-cpp 0.7 never returns on some malformed text: libyaml checks it first.
  STAR_RETURN_IF_ERROR(yaml::CheckSyntax(text, "yaml"));
  std::vector<json> docs;
  // Every node takes at least a character, but an alias repeats what it names.
  Converter converter(text.size() + 1000);
  try {
    for (const auto& node : YAML::LoadAll(text)) {
      STAR_ASSIGN_OR_RETURN(json doc, converter.ToJson(node, 0));
      if (!doc.is_null()) docs.push_back(std::move(doc));
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("yaml: line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return docs;
}

StatusOr<json> ParseYamlDocument(const std::string& text) {
  STAR_ASSIGN_OR_RETURN(auto docs, ParseYamlDocuments(text));
  if (docs.size() != 1) {
    return Status::InvalidArgument("yaml: expected one document, found " + std::to_string(docs.size()));
  }
  return std::move(docs[0]);
}

std::string ToYaml(const json& value) {
  YAML::Emitter out;
  Emit(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace star::apiserver
