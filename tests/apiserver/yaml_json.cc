#include "yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <limits>
#include <regex>

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

json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      // "?" is the tag of a plain scalar; quoted ones carry "!" and stay strings.
      if (node.Tag() == "?") return ResolvePlainScalar(node.Scalar());
      return node.Scalar();
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) out.push_back(ToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = ToJson(kv.second);
      return out;
    }
  }
  return nullptr;
}

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
  std::vector<json> docs;
  try {
    for (const auto& node : YAML::LoadAll(text)) {
      json doc = ToJson(node);
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
