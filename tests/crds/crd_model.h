// Test support for the CRDs in crds/: reading them (YAML -> JSON), walking their
// openAPIV3Schema, and generating documents that probe every rule the schema states
// (fields, enums, bounds, lengths, patterns, formats, required fields, defaults,
// unknown fields, list-map keys) so that the C++ codecs and a schema validator can both
// be asked about them and must agree.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "star/core/status.h"

namespace star::crds {

// ---- YAML ----

// Reads a one-document YAML file into JSON the way kubectl (go-yaml v2, YAML 1.1) reads
// it: a plain scalar is a null (null, ~, empty), a boolean (true/false/yes/no/on/off in
// their usual capitalizations), an integer (decimal, with optional sign), a float
// (decimal with '.' or exponent) or else a string; a quoted scalar is always a string.
// Errors: InvalidArgument naming the file (unreadable, malformed YAML).
StatusOr<nlohmann::json> LoadYamlAsJson(const std::string& file);

// crds/<file> under STAR_CRDS_DIR (set by the build), loaded with LoadYamlAsJson.
StatusOr<nlohmann::json> LoadCrd(std::string_view file);

// The single version's openAPIV3Schema of a CRD document (null when absent).
const nlohmann::json& OpenApiSchema(const nlohmann::json& crd);
// The single entry of spec.versions of a CRD document (null when absent).
const nlohmann::json& CrdVersion(const nlohmann::json& crd);

// ---- paths ----

// One step of a path: an object key, or an array index when `is_index`.
struct PathStep {
  std::string key;
  size_t index = 0;
  bool is_index = false;

  friend bool operator==(const PathStep&, const PathStep&) = default;
};
using Path = std::vector<PathStep>;

Path Child(Path p, std::string key);
Path Item(Path p, size_t index);
// Parses "spec.workers.replicas" or "status.groups[0][1]"; "" is the root.
Path ParsePath(std::string_view s);
// The form star::api errors use: "status.conditions[0].type"; "" for the root.
// With `wildcard`, indices print as [*] ("status.conditions[*].type").
std::string ToString(const Path& p, bool wildcard = false);

// The value at `p`, or nullptr when some step is missing.
const nlohmann::json* Find(const nlohmann::json& doc, const Path& p);
// Sets the value at `p`, creating objects on the way; `p` must not be the root.
void Set(nlohmann::json& doc, const Path& p, nlohmann::json value);
// Removes the value at `p`; false when it was not there.
bool Erase(nlohmann::json& doc, const Path& p);

// ---- the schema ----

// One property of the schema, with the document path it describes (array items at
// index 0).
struct SchemaNode {
  Path path;
  const nlohmann::json* schema = nullptr;
  bool required = false;      // listed in its parent object's `required`
  bool server_owned = false;  // metadata and what is under it, apiVersion, kind
};

// Every node under `schema` (the root excluded), parents before children. Does not
// descend into x-kubernetes-preserve-unknown-fields subtrees that declare no properties.
std::vector<SchemaNode> Walk(const nlohmann::json& schema);
// The schema node describing `p` (indices step into `items`), or nullptr.
const nlohmann::json* SchemaAt(const nlohmann::json& schema, const Path& p);
// True for paths the API server owns (ObjectMeta and the type meta).
bool IsServerOwned(const Path& p);
// True when the schema keeps unknown fields (x-kubernetes-preserve-unknown-fields).
bool PreservesUnknown(const nlohmann::json& schema);

// Kubernetes structural defaulting: every absent property with a `default` gets it,
// recursively (including inside defaults just applied and inside array items).
void ApplyDefaults(const nlohmann::json& schema, nlohmann::json& value);

// "integer", "number", "string", "boolean", "object" or "array" for a JSON value the
// way an OpenAPI schema's `type` names it (an integral number is an "integer").
std::string OpenApiType(const nlohmann::json& v);

// ---- generated cases ----

enum class Expect {
  kValid,       // both sides accept
  kInvalid,     // both sides reject
  kPruned,      // an unknown field: the server prunes it and accepts, C++ rejects it
  kCrossField,  // violates an x-kubernetes-validations (CEL) rule only
};

struct Case {
  std::string name;  // what it probes: "enum spec.architecture = \"AllReduce\""
  nlohmann::json doc;
  Expect expect = Expect::kValid;
  // The field the case is about. Rejected cases: the C++ error starts with "<field>:".
  Path field;
  // Rejected cases: the C++ error ends with this, when set.
  std::string message_suffix;
  // Accepted cases: what a decode-encode round trip writes at `field`.
  enum class Written { kUnchecked, kValue, kAbsent } written = Written::kUnchecked;
  nlohmann::json written_value;
};

// What the generator needs to know about one kind besides its schema.
struct KindModel {
  std::string kind;        // "TrainingJob"
  std::string crd_file;    // "trainingjobs.star.dev.yaml"
  nlohmann::json example;  // valid, with every field the schema declares set
  // Restores the cross-field rules after the value at `changed` was set or removed,
  // changing only other fields. Identity for a kind without such rules.
  std::function<void(nlohmann::json& doc, const Path& changed)> repair;
  // One document per cross-field rule violation, keyed by the field path the C++ error
  // names ("spec.synchronization.minK"); every CEL rule of the CRD has one here, found
  // by its fieldPath.
  std::vector<std::pair<std::string, nlohmann::json>> cross_field_violations;
  // Every wire spelling the kind's C++ enums know. Each is probed at every enum of the
  // schema (with the schema's own values), so an enum value C++ knows but the schema
  // lacks is caught too.
  std::vector<std::string> cpp_enum_names;
};

// Generates the cases for `schema` from `model`. A case that cannot be built (no string
// of the needed length matches a pattern) is reported in *errors instead.
std::vector<Case> GenerateCases(const nlohmann::json& schema, const KindModel& model,
                                std::vector<std::string>* errors);

std::string_view ExpectName(Expect e);

}  // namespace star::crds
