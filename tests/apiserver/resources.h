// The kinds the emulator serves: the built-in ones it needs (pods, services, events,
// namespaces, configmaps, secrets, nodes, leases, customresourcedefinitions) and one per
// CustomResourceDefinition; their discovery documents and OpenAPI v3 index.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "schema.h"
#include "star/core/status.h"

namespace star::apiserver {

// A column of `kubectl get` (a CRD's additionalPrinterColumns entry). json_path starting
// with '#' names a column the emulator computes (built-in kinds: "#ready", "#restarts",
// "#data", "#object").
struct PrinterColumn {
  std::string name;
  std::string type = "string";  // string | integer | number | boolean | date
  std::string format;
  std::string description;
  std::string json_path;
  int priority = 0;  // > 0: only with -o wide
};

struct VersionSpec {
  std::string name;                    // "v1alpha1"
  bool storage = false;
  nlohmann::json schema;               // openAPIV3Schema; null: accept anything, prune nothing
  bool status_subresource = false;
  std::vector<PrinterColumn> columns;  // empty: NAME and AGE
};

struct ResourceType {
  std::string group;  // "" for the core group
  std::string plural, singular, kind, list_kind;
  std::vector<std::string> short_names, categories;
  bool namespaced = true;
  bool builtin = true;           // false: defined by a CustomResourceDefinition
  bool tracks_generation = false;  // metadata.generation (custom resources, CRDs)
  std::vector<VersionSpec> versions;  // served versions

  const VersionSpec* Version(const std::string& version) const;  // nullptr if not served
  const VersionSpec& StorageVersion() const;
  bool HasStatus() const;  // the storage version has a status subresource
  std::string ApiVersion(const std::string& version) const;  // "star.dev/v1alpha1" or "v1"
  std::string GroupResource() const;  // "trainingjobs.star.dev" or "pods"
  std::string QualifiedKind() const;  // "TrainingJob.star.dev" or "Pod"
};
using TypePtr = std::shared_ptr<const ResourceType>;

// The served type of a CustomResourceDefinition (apiextensions.k8s.io/v1). The errors name
// the offending fields (spec.group, spec.names.plural, spec.versions[0].name, ...); empty
// means `crd` is usable.
std::vector<SchemaError> ValidateCrd(const nlohmann::json& crd);
StatusOr<ResourceType> TypeFromCrd(const nlohmann::json& crd);

// Kubernetes' version priority: GA before beta before alpha, higher numbers first, then
// anything else alphabetically. True if `a` sorts before `b`.
bool VersionPriorityLess(const std::string& a, const std::string& b);

// Thread-safe registry of served types. Types are immutable snapshots: a CRD update
// replaces its type, and requests in flight keep the one they looked up.
class Registry {
 public:
  Registry();  // the built-in types

  // The type serving `resource` (its plural) in group/version; nullptr if none.
  TypePtr Find(const std::string& group, const std::string& version, const std::string& resource) const;
  TypePtr FindGroupResource(const std::string& group, const std::string& resource) const;
  std::vector<TypePtr> All() const;

  // Adds or replaces the type of a CRD; removes the one of a CRD by group and plural.
  void Put(TypePtr type);
  void Remove(const std::string& group, const std::string& plural);

  // Discovery: /api, /apis, /apis/<group>, /api/v1 and /apis/<group>/<version>.
  nlohmann::json CoreVersions(const std::string& server_address) const;
  nlohmann::json GroupList() const;
  std::optional<nlohmann::json> Group(const std::string& group) const;
  std::optional<nlohmann::json> ResourceList(const std::string& group, const std::string& version) const;

  // OpenAPI v3: the index (/openapi/v3) and one group-version document, enough for
  // kubectl to learn that every kind supports server-side field validation (so it sends
  // ?fieldValidation= instead of validating client-side) and that custom resources take
  // merge patches.
  nlohmann::json OpenApiIndex() const;
  std::optional<nlohmann::json> OpenApiDocument(const std::string& group, const std::string& version) const;

 private:
  std::vector<std::string> VersionsOf(const std::string& group) const;  // by priority
  mutable std::mutex mu_;
  std::vector<TypePtr> types_;  // built-ins first, then CRDs in order of arrival
};

}  // namespace star::apiserver
