// The ObjectMeta rules the API server checks for every kind (built-in and custom): names
// (an RFC 1123 subdomain of at most 253 characters; a namespace an RFC 1123 label, a
// service an RFC 1035 label, both at most 63), generateName, label keys and values,
// annotation keys and their total size, and ownerReferences' required fields. The JSON
// types of these fields are object_types.h's.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "resources.h"
#include "schema.h"

namespace star::apiserver {

inline constexpr size_t kMaxNameLength = 253;         // DNS subdomain names
inline constexpr size_t kMaxLabelLength = 63;         // DNS labels, label values, key names
inline constexpr size_t kMaxAnnotationsBytes = 256 * 1024;  // keys and values together
inline constexpr size_t kGenerateNamePrefix = 58;     // longer generateNames are cut here

// The field errors of `object`'s metadata for a kind (422 Invalid when any).
std::vector<SchemaError> ValidateMeta(const ResourceType& type, const nlohmann::json& object);

// Whether `name` is an RFC 1123 subdomain: dot-separated labels of [a-z0-9-], each
// starting and ending alphanumeric; at most 253 characters.
bool IsSubdomain(const std::string& name);

}  // namespace star::apiserver
