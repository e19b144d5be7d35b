// Kubernetes object metadata shared by STAR's custom resources, mirroring metav1:
// ObjectMeta (the subset STAR reads and writes), Condition, and the name and
// timestamp syntax checks their decoders apply.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/json_reader.h"
#include "star/core/status.h"

namespace star::api {

// API group and version of every STAR custom resource.
inline constexpr std::string_view kApiVersion = "star.dev/v1alpha1";

// Upper bound of the counters, generations, rates and durations that have no natural
// limit (iterations, observedGeneration, bits per second, seconds): 2^53 - 1, the
// largest integer every JSON reader holds exactly. The CRDs state it as `maximum`.
inline constexpr int64_t kMaxJsonInteger = (int64_t{1} << 53) - 1;

// RFC 1123 label: 1..63 characters of [a-z0-9-], starting and ending with [a-z0-9].
// (Namespaces, TrainingJob names.)
[[nodiscard]] bool IsDns1123Label(std::string_view s);
// RFC 1123 subdomain: 1..253 characters, dot-separated DNS-1123 labels.
// (Pod and node names.)
[[nodiscard]] bool IsDns1123Subdomain(std::string_view s);
// RFC 3339 date-time: "YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)" ('t'/'z' accepted),
// with field ranges checked (month 1..12, day 1..31, hour 0..23, minute 0..59,
// second 0..60). Does not check the day against the month's length.
[[nodiscard]] bool IsRfc3339(std::string_view s);

// Errors "<path>: must be a DNS-1123 label (...), got \"X\"" when `s` is not one.
[[nodiscard]] Status CheckDns1123Label(std::string_view s, const std::string& path);
[[nodiscard]] Status CheckDns1123Subdomain(std::string_view s, const std::string& path);

// metav1.ObjectMeta, the fields STAR uses. Decoding ignores every other metadata field
// (creationTimestamp, ownerReferences, managedFields, ...): the API server owns them.
struct ObjectMeta {
  std::string name;                    // required
  std::string namespace_ = "default";  // wire: "namespace"; ignored for cluster-scoped kinds
  std::string uid;                     // "" until the API server assigned one
  int64_t generation = 0;              // 0 until the API server assigned one
  std::string resource_version;        // wire: "resourceVersion"; "" when unknown
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;

  friend bool operator==(const ObjectMeta&, const ObjectMeta&) = default;
};

// Writes name (and namespace when `namespaced`) always; uid, resourceVersion,
// generation, labels and annotations only when set (non-empty / non-zero).
nlohmann::json ToJson(const ObjectMeta& m, bool namespaced = true);
// Decodes and validates metadata: name is required and must be a DNS-1123 label
// (`namespaced`) or subdomain (cluster-scoped); namespace, when present, must be a
// DNS-1123 label (default "default"); generation >= 0; labels and annotations must map
// strings to strings. Unknown fields are ignored (see ObjectMeta).
StatusOr<ObjectMeta> ObjectMetaFromJson(const nlohmann::json& j, bool namespaced = true,
                                        const std::string& path = "metadata");

// Checks "apiVersion" and "kind" of a Kubernetes object document: each, when present,
// must be a string equal to kApiVersion / `kind`. Errors name the field:
// "apiVersion: must be \"star.dev/v1alpha1\", got \"v1\"".
[[nodiscard]] Status CheckTypeMeta(const nlohmann::json& j, std::string_view kind);

// Bounds of a condition list (status.conditions of both kinds) and of its strings, as
// metav1.Condition states them: at most kMaxConditions conditions, type at most 316
// characters, reason 1024, message 32768.
inline constexpr size_t kMaxConditions = 32;
inline constexpr size_t kMaxConditionTypeLength = 316;
inline constexpr size_t kMaxConditionReasonLength = 1024;
inline constexpr size_t kMaxConditionMessageLength = 32768;

// metav1.Condition.
struct Condition {
  std::string type;                  // required, non-empty ("Ready", "Applied", ...)
  std::string status;                // required: "True" | "False" | "Unknown"
  std::string reason;                // CamelCase machine-readable reason; may be empty
  std::string message;               // human-readable; may be empty
  std::string last_transition_time;  // RFC 3339; "" when unknown (then omitted on the wire)
  int64_t observed_generation = 0;   // >= 0

  friend bool operator==(const Condition&, const Condition&) = default;
};

// camelCase: type, status, reason, message, lastTransitionTime (only when non-empty),
// observedGeneration.
nlohmann::json ToJson(const Condition& c);
// Validates every field; rejects unknown fields. Errors name the field path.
StatusOr<Condition> ConditionFromJson(const nlohmann::json& j, const std::string& path);
// Decodes an optional array of at most kMaxConditions conditions at `key` of `reader`'s
// object into `out`; condition types must be unique ("<path>[2].type: duplicate of <path>[0]").
void ReadConditions(ObjectReader& reader, std::string_view key, std::vector<Condition>* out);

}  // namespace star::api
