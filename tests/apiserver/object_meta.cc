#include "object_meta.h"

#include <cctype>

#include "store.h"

namespace star::apiserver {
namespace {

using nlohmann::json;

constexpr char kSubdomainMessage[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
constexpr char kLabelMessage[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
constexpr char kDns1035Message[] =
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation "
    "is '[a-z]([-a-z0-9]*[a-z0-9])?')";
constexpr char kNamePartMessage[] =
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
constexpr char kLabelValueMessage[] =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

bool LowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// An RFC 1123 label's characters (the length is checked apart).
bool IsDnsLabel(const std::string& s) {
  if (s.empty() || !LowerAlnum(s.front()) || !LowerAlnum(s.back())) return false;
  for (const char c : s) {
    if (!LowerAlnum(c) && c != '-') return false;
  }
  return true;
}

// "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]": label values and the name part of keys.
bool IsQualifiedPart(const std::string& s) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (s.empty() || !alnum(s.front()) || !alnum(s.back())) return false;
  for (const char c : s) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

std::string TooLong(size_t max) { return "must be no more than " + std::to_string(max) + " characters"; }

class MetaErrors {
 public:
  std::vector<SchemaError> errors;

  void Invalid(const std::string& field, const std::string& value, const std::string& why) {
    errors.push_back({field, "FieldValueInvalid", "Invalid value: " + json(value).dump() + ": " + why});
  }

  // A name by the kind's rule: namespaces RFC 1123 labels, services RFC 1035 labels,
  // everything else RFC 1123 subdomains.
  // `shown` is the value named in messages.
  void Name(const ResourceType& type, const std::string& field, const std::string& name, const std::string& shown) {
    const bool core = type.group.empty();
    if (core && (type.plural == "namespaces" || type.plural == "services")) {
      if (name.size() > kMaxLabelLength) Invalid(field, shown, TooLong(kMaxLabelLength));
      if (type.plural == "namespaces" && !IsDnsLabel(name)) Invalid(field, shown, kLabelMessage);
      if (type.plural == "services" && !(IsDnsLabel(name) && name[0] >= 'a' && name[0] <= 'z')) {
        Invalid(field, shown, kDns1035Message);
      }
      return;
    }
    if (name.size() > kMaxNameLength) Invalid(field, shown, TooLong(kMaxNameLength));
    if (!IsSubdomain(name.substr(0, kMaxNameLength))) Invalid(field, shown, kSubdomainMessage);
  }

  // A label or annotation key: [DNS subdomain prefix "/"] name.
  void Key(const std::string& field, const std::string& key) {
    const size_t slash = key.find('/');
    std::string name = key;
    if (slash != std::string::npos) {
      const std::string prefix = key.substr(0, slash);
      name = key.substr(slash + 1);
      if (prefix.empty()) Invalid(field, key, "prefix part must be non-empty");
      if (prefix.size() > kMaxNameLength) Invalid(field, key, "prefix part " + TooLong(kMaxNameLength));
      if (!prefix.empty() && !IsSubdomain(prefix.substr(0, kMaxNameLength))) {
        Invalid(field, key, std::string("prefix part ") + kSubdomainMessage);
      }
    }
    if (name.empty()) {
      Invalid(field, key, "name part must be non-empty");
      return;
    }
    if (name.size() > kMaxLabelLength) Invalid(field, key, "name part " + TooLong(kMaxLabelLength));
    if (!IsQualifiedPart(name)) Invalid(field, key, kNamePartMessage);
  }

  void Labels(const json& labels) {
    for (const auto& [key, value] : labels.items()) {
      Key("metadata.labels", key);
      const std::string v = value.is_string() ? value.get<std::string>() : std::string();
      if (v.size() > kMaxLabelLength) Invalid("metadata.labels", v, TooLong(kMaxLabelLength));
      if (!v.empty() && !IsQualifiedPart(v)) Invalid("metadata.labels", v, kLabelValueMessage);
    }
  }

  void Annotations(const json& annotations) {
    size_t bytes = 0;
    for (const auto& [key, value] : annotations.items()) {
      std::string lower = key;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      Key("metadata.annotations", lower);
      bytes += key.size() + (value.is_string() ? value.get_ref<const std::string&>().size() : 0);
    }
    if (bytes > kMaxAnnotationsBytes) {
      errors.push_back({"metadata.annotations", "FieldValueTooLong",
                        "Too long: must have at most " + std::to_string(kMaxAnnotationsBytes) + " bytes"});
    }
  }

  void OwnerReferences(const json& refs) {
    for (size_t i = 0; i < refs.size(); ++i) {
      if (!refs[i].is_object()) continue;
      for (const char* f : {"apiVersion", "kind", "name", "uid"}) {
        if (!refs[i].contains(f) || refs[i][f] == "") {
          errors.push_back({"metadata.ownerReferences[" + std::to_string(i) + "]." + f, "FieldValueRequired",
                            "Required value"});
        }
      }
    }
  }
};

}  // namespace

bool IsSubdomain(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('.', start);
    if (end == std::string::npos) end = name.size();
    if (!IsDnsLabel(name.substr(start, end - start))) return false;
    start = end + 1;
  }
  return true;
}

std::vector<SchemaError> ValidateMeta(const ResourceType& type, const json& object) {
  MetaErrors e;
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) return e.errors;
  const json& meta = object["metadata"];
  const std::string name = Meta(object, "name");
  const std::string generate = Meta(object, "generateName");
  if (!name.empty()) {
    e.Name(type, "metadata.name", name, name);
  } else if (!generate.empty()) {
    // What the store will generate: the prefix, cut to 58 characters, and 5 more.
    e.Name(type, "metadata.generateName", generate.substr(0, kGenerateNamePrefix) + "x2x4x", generate);
  }
  if (meta.contains("labels") && meta["labels"].is_object()) e.Labels(meta["labels"]);
  if (meta.contains("annotations") && meta["annotations"].is_object()) e.Annotations(meta["annotations"]);
  if (meta.contains("ownerReferences") && meta["ownerReferences"].is_array()) {
    e.OwnerReferences(meta["ownerReferences"]);
  }
  return std::move(e.errors);
}

}  // namespace star::apiserver
