#include "resources.h"

#include "api_status.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <set>
#include <tuple>

namespace star::apiserver {

using nlohmann::json;

const VersionSpec* ResourceType::Version(const std::string& version) const {
  for (const auto& v : versions) {
    if (v.name == version) return &v;
  }
  return nullptr;
}

const VersionSpec& ResourceType::StorageVersion() const {
  for (const auto& v : versions) {
    if (v.storage) return v;
  }
  return versions.front();
}

bool ResourceType::HasStatus() const { return StorageVersion().status_subresource; }

std::string ResourceType::ApiVersion(const std::string& version) const {
  return group.empty() ? version : group + "/" + version;
}

std::string ResourceType::GroupResource() const { return GroupResourceName(group, plural); }

std::string ResourceType::QualifiedKind() const { return group.empty() ? kind : kind + "." + group; }

namespace {

PrinterColumn Column(std::string name, std::string json_path, std::string type = "string", int priority = 0) {
  PrinterColumn c;
  c.name = std::move(name);
  c.json_path = std::move(json_path);
  c.type = std::move(type);
  c.priority = priority;
  return c;
}

PrinterColumn AgeColumn() { return Column("Age", ".metadata.creationTimestamp", "date"); }

TypePtr Builtin(std::string group, std::string version, std::string plural, std::string singular,
                std::string kind, std::vector<std::string> short_names, bool namespaced, bool status,
                std::vector<PrinterColumn> columns, std::vector<std::string> categories = {}) {
  auto t = std::make_shared<ResourceType>();
  t->group = std::move(group);
  t->plural = std::move(plural);
  t->singular = std::move(singular);
  t->kind = std::move(kind);
  t->list_kind = t->kind + "List";
  t->short_names = std::move(short_names);
  t->categories = std::move(categories);
  t->namespaced = namespaced;
  t->builtin = true;
  VersionSpec v;
  v.name = std::move(version);
  v.storage = true;
  v.schema = nullptr;
  v.status_subresource = status;
  v.columns = std::move(columns);
  t->versions.push_back(std::move(v));
  return t;
}

std::vector<TypePtr> BuiltinTypes() {
  std::vector<TypePtr> types;
  types.push_back(Builtin("", "v1", "pods", "pod", "Pod", {"po"}, true, true,
                          {Column("Ready", "#ready"), Column("Status", ".status.phase"),
                           Column("Restarts", "#restarts", "integer"), AgeColumn(),
                           Column("IP", ".status.podIP", "string", 1),
                           Column("Node", ".spec.nodeName", "string", 1)},
                          {"all"}));
  types.push_back(Builtin("", "v1", "services", "service", "Service", {"svc"}, true, true,
                          {Column("Type", ".spec.type"), Column("Cluster-IP", ".spec.clusterIP"), AgeColumn()},
                          {"all"}));
  types.push_back(Builtin("", "v1", "events", "event", "Event", {"ev"}, true, false,
                          {Column("Last Seen", ".lastTimestamp", "date"), Column("Type", ".type"),
                           Column("Reason", ".reason"), Column("Object", "#object"),
                           Column("Message", ".message")}));
  types.push_back(Builtin("", "v1", "namespaces", "namespace", "Namespace", {"ns"}, false, true,
                          {Column("Status", ".status.phase"), AgeColumn()}));
  types.push_back(Builtin("", "v1", "configmaps", "configmap", "ConfigMap", {"cm"}, true, false,
                          {Column("Data", "#data", "integer"), AgeColumn()}));
  types.push_back(Builtin("", "v1", "secrets", "secret", "Secret", {}, true, false,
                          {Column("Type", ".type"), Column("Data", "#data", "integer"), AgeColumn()}));
  types.push_back(Builtin("", "v1", "nodes", "node", "Node", {"no"}, false, true, {AgeColumn()}));
  types.push_back(Builtin("coordination.k8s.io", "v1", "leases", "lease", "Lease", {}, true, false,
                          {Column("Holder", ".spec.holderIdentity"), AgeColumn()}));
  types.push_back(Builtin("events.k8s.io", "v1", "events", "event", "Event", {"ev"}, true, false,
                          {Column("Reason", ".reason"), Column("Note", ".note"), AgeColumn()}));
  // What the Helm chart installs (helm/star): workloads, accounts and RBAC.
  types.push_back(Builtin("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", {"sa"}, true, false,
                          {AgeColumn()}));
  types.push_back(Builtin("apps", "v1", "deployments", "deployment", "Deployment", {"deploy"}, true, true,
                          {Column("Ready", ".status.readyReplicas", "integer"),
                           Column("Up-to-date", ".status.updatedReplicas", "integer"),
                           Column("Available", ".status.availableReplicas", "integer"), AgeColumn()},
                          {"all"}));
  types.push_back(Builtin("apps", "v1", "daemonsets", "daemonset", "DaemonSet", {"ds"}, true, true,
                          {Column("Desired", ".status.desiredNumberScheduled", "integer"),
                           Column("Ready", ".status.numberReady", "integer"), AgeColumn()},
                          {"all"}));
  for (const auto& [plural, singular, kind, namespaced] :
       {std::tuple{"roles", "role", "Role", true}, {"rolebindings", "rolebinding", "RoleBinding", true},
        {"clusterroles", "clusterrole", "ClusterRole", false},
        {"clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", false}}) {
    types.push_back(
        Builtin("rbac.authorization.k8s.io", "v1", plural, singular, kind, {}, namespaced, false, {AgeColumn()}));
  }
  auto crd = std::make_shared<ResourceType>(*Builtin(
      "apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
      "CustomResourceDefinition", {"crd", "crds"}, false, true,
      {Column("Created At", ".metadata.creationTimestamp")}, {"api-extensions"}));
  crd->tracks_generation = true;
  types.push_back(crd);
  return types;
}

const json& Get(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

std::string Str(const json& obj, const char* key) {
  const json& v = Get(obj, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

std::vector<std::string> Strings(const json& v) {
  std::vector<std::string> out;
  if (!v.is_array()) return out;
  for (const auto& s : v) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

json Verbs() { return {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}; }

json DocHash(const json& doc) {
  return std::to_string(std::hash<std::string>{}(doc.dump()));
}

}  // namespace

std::vector<SchemaError> ValidateCrd(const json& crd) {
  std::vector<SchemaError> errors;
  auto required = [&](const std::string& field) { errors.push_back({field, "FieldValueRequired", "Required value"}); };
  const json& spec = Get(crd, "spec");
  const json& names = Get(spec, "names");
  const std::string group = Str(spec, "group");
  const std::string plural = Str(names, "plural");
  const std::string name = Str(Get(crd, "metadata"), "name");
  if (group.empty()) {
    required("spec.group");
  } else if (group.find('.') == std::string::npos) {
    errors.push_back({"spec.group", "FieldValueInvalid",
                      "Invalid value: \"" + group + "\": should be a domain with at least one dot"});
  }
  if (plural.empty()) required("spec.names.plural");
  if (Str(names, "kind").empty()) required("spec.names.kind");
  if (!group.empty() && !plural.empty() && name != plural + "." + group) {
    errors.push_back({"metadata.name", "FieldValueInvalid",
                      "Invalid value: \"" + name + "\": must be spec.names.plural+\".\"+spec.group"});
  }
  const std::string scope = Str(spec, "scope");
  if (scope.empty()) {
    required("spec.scope");
  } else if (scope != "Namespaced" && scope != "Cluster") {
    errors.push_back({"spec.scope", "FieldValueNotSupported",
                      "Unsupported value: \"" + scope + "\": supported values: \"Cluster\", \"Namespaced\""});
  }
  const json& versions = Get(spec, "versions");
  if (!versions.is_array() || versions.empty()) {
    required("spec.versions");
    return errors;
  }
  int storage = 0;
  for (size_t i = 0; i < versions.size(); ++i) {
    const std::string field = "spec.versions[" + std::to_string(i) + "]";
    if (Str(versions[i], "name").empty()) required(field + ".name");
    if (Get(versions[i], "storage").is_boolean() && versions[i]["storage"].get<bool>()) ++storage;
    const json& schema = Get(Get(versions[i], "schema"), "openAPIV3Schema");
    if (!schema.is_null() && !schema.is_object()) {
      errors.push_back({field + ".schema.openAPIV3Schema", "FieldValueInvalid",
                        "Invalid value: \"\": must be an object"});
    }
  }
  if (storage != 1) {
    errors.push_back({"spec.versions", "FieldValueInvalid",
                      "Invalid value: " + versions.dump() + ": must have exactly one version marked as storage version"});
  }
  return errors;
}

StatusOr<ResourceType> TypeFromCrd(const json& crd) {
  const auto errors = ValidateCrd(crd);
  if (!errors.empty()) {
    return Status::InvalidArgument("CustomResourceDefinition \"" + Str(Get(crd, "metadata"), "name") +
                                   "\" is invalid: " + FormatSchemaErrors(errors));
  }
  const json& spec = crd["spec"];
  const json& names = spec["names"];
  ResourceType t;
  t.group = Str(spec, "group");
  t.plural = Str(names, "plural");
  t.kind = Str(names, "kind");
  t.singular = Str(names, "singular");
  if (t.singular.empty()) t.singular = Lower(t.kind);
  t.list_kind = Str(names, "listKind");
  if (t.list_kind.empty()) t.list_kind = t.kind + "List";
  t.short_names = Strings(Get(names, "shortNames"));
  t.categories = Strings(Get(names, "categories"));
  t.namespaced = Str(spec, "scope") == "Namespaced";
  t.builtin = false;
  t.tracks_generation = true;
  for (const auto& v : spec["versions"]) {
    if (Get(v, "served").is_boolean() && !v["served"].get<bool>()) continue;
    VersionSpec vs;
    vs.name = Str(v, "name");
    vs.storage = Get(v, "storage").is_boolean() && v["storage"].get<bool>();
    vs.schema = Get(Get(v, "schema"), "openAPIV3Schema");
    vs.status_subresource = Get(Get(v, "subresources"), "status").is_object();
    const json& columns = Get(v, "additionalPrinterColumns");
    if (columns.is_array()) {
      for (const auto& c : columns) {
        PrinterColumn pc;
        pc.name = Str(c, "name");
        pc.type = Str(c, "type");
        pc.format = Str(c, "format");
        pc.description = Str(c, "description");
        pc.json_path = Str(c, "jsonPath");
        pc.priority = Get(c, "priority").is_number_integer() ? c["priority"].get<int>() : 0;
        vs.columns.push_back(std::move(pc));
      }
    }
    t.versions.push_back(std::move(vs));
  }
  if (t.versions.empty()) {
    return Status::InvalidArgument("CustomResourceDefinition \"" + Str(Get(crd, "metadata"), "name") +
                                   "\" serves no version");
  }
  return t;
}

namespace {

// A Kubernetes version name: v<major>[(alpha|beta)<minor>]. stability: 2 GA, 1 beta, 0 alpha.
struct KubeVersion {
  bool valid = false;
  int stability = 2;
  long major = 0, minor = 0;
};

KubeVersion ParseKubeVersion(const std::string& v) {
  KubeVersion out;
  auto digits = [&](size_t from, size_t& to) {
    to = from;
    while (to < v.size() && std::isdigit(static_cast<unsigned char>(v[to]))) ++to;
    return to > from && to - from < 10;
  };
  size_t end = 0;
  if (v.size() < 2 || v[0] != 'v' || v[1] == '0' || !digits(1, end)) return out;
  out.major = std::stol(v.substr(1, end - 1));
  if (end == v.size()) {
    out.valid = true;
    return out;
  }
  for (const auto& [word, stability] : {std::pair<std::string, int>{"alpha", 0}, {"beta", 1}}) {
    if (v.compare(end, word.size(), word) != 0) continue;
    size_t minor_end = 0;
    if (!digits(end + word.size(), minor_end) || minor_end != v.size()) return out;
    out.minor = std::stol(v.substr(end + word.size()));
    out.stability = stability;
    out.valid = true;
  }
  return out;
}

}  // namespace

bool VersionPriorityLess(const std::string& a, const std::string& b) {
  const KubeVersion va = ParseKubeVersion(a), vb = ParseKubeVersion(b);
  if (va.valid != vb.valid) return va.valid;
  if (!va.valid) return a < b;
  if (va.stability != vb.stability) return va.stability > vb.stability;
  if (va.major != vb.major) return va.major > vb.major;
  return va.minor > vb.minor;
}

Registry::Registry() : types_(BuiltinTypes()) {}

TypePtr Registry::Find(const std::string& group, const std::string& version, const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& t : types_) {
    if (t->group == group && t->plural == resource && t->Version(version) != nullptr) return t;
  }
  return nullptr;
}

TypePtr Registry::FindGroupResource(const std::string& group, const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& t : types_) {
    if (t->group == group && t->plural == resource) return t;
  }
  return nullptr;
}

std::vector<TypePtr> Registry::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  return types_;
}

void Registry::Put(TypePtr type) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& t : types_) {
    if (!t->builtin && t->group == type->group && t->plural == type->plural) {
      t = std::move(type);
      return;
    }
  }
  types_.push_back(std::move(type));
}

void Registry::Remove(const std::string& group, const std::string& plural) {
  std::lock_guard<std::mutex> lock(mu_);
  types_.erase(std::remove_if(types_.begin(), types_.end(),
                              [&](const TypePtr& t) { return !t->builtin && t->group == group && t->plural == plural; }),
               types_.end());
}

std::vector<std::string> Registry::VersionsOf(const std::string& group) const {
  std::set<std::string> versions;
  for (const auto& t : All()) {
    if (t->group != group) continue;
    for (const auto& v : t->versions) versions.insert(v.name);
  }
  std::vector<std::string> out(versions.begin(), versions.end());
  std::sort(out.begin(), out.end(), VersionPriorityLess);
  return out;
}

json Registry::CoreVersions(const std::string& server_address) const {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs", {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}}}};
}

json Registry::GroupList() const {
  std::vector<std::string> groups;
  for (const auto& t : All()) {
    if (!t->group.empty() && std::find(groups.begin(), groups.end(), t->group) == groups.end()) {
      groups.push_back(t->group);
    }
  }
  json list = {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", json::array()}};
  for (const auto& g : groups) {
    auto found = Group(g);
    if (!found) continue;  // its last CRD went meanwhile
    json group = std::move(*found);
    group.erase("kind");
    group.erase("apiVersion");
    list["groups"].push_back(std::move(group));
  }
  return list;
}

std::optional<json> Registry::Group(const std::string& group) const {
  const auto versions = VersionsOf(group);
  if (group.empty() || versions.empty()) return std::nullopt;
  json g = {{"kind", "APIGroup"}, {"apiVersion", "v1"}, {"name", group}, {"versions", json::array()}};
  for (const auto& v : versions) g["versions"].push_back({{"groupVersion", group + "/" + v}, {"version", v}});
  g["preferredVersion"] = g["versions"][0];
  return g;
}

std::optional<json> Registry::ResourceList(const std::string& group, const std::string& version) const {
  json resources = json::array();
  for (const auto& t : All()) {
    if (t->group != group) continue;
    const VersionSpec* v = t->Version(version);
    if (v == nullptr) continue;
    json r = {{"name", t->plural},     {"singularName", t->singular}, {"namespaced", t->namespaced},
              {"kind", t->kind},       {"verbs", Verbs()}};
    if (!t->short_names.empty()) r["shortNames"] = t->short_names;
    if (!t->categories.empty()) r["categories"] = t->categories;
    resources.push_back(std::move(r));
    if (v->status_subresource) {
      resources.push_back({{"name", t->plural + "/status"},
                           {"singularName", ""},
                           {"namespaced", t->namespaced},
                           {"kind", t->kind},
                           {"verbs", {"get", "patch", "update"}}});
    }
  }
  if (resources.empty()) return std::nullopt;
  return json{{"kind", "APIResourceList"},
              {"apiVersion", "v1"},
              {"groupVersion", group.empty() ? version : group + "/" + version},
              {"resources", resources}};
}

json Registry::OpenApiIndex() const {
  std::set<std::pair<std::string, std::string>> gvs;
  for (const auto& t : All()) {
    for (const auto& v : t->versions) gvs.insert({t->group, v.name});
  }
  json paths = json::object();
  for (const auto& [group, version] : gvs) {
    const std::string key = group.empty() ? "api/" + version : "apis/" + group + "/" + version;
    auto doc = OpenApiDocument(group, version);
    if (!doc) continue;
    paths[key] = {{"serverRelativeURL", "/openapi/v3/" + key + "?hash=" + DocHash(*doc).get<std::string>()}};
  }
  return {{"paths", paths}};
}

std::optional<json> Registry::OpenApiDocument(const std::string& group, const std::string& version) const {
  json paths = json::object();
  const std::string prefix = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  for (const auto& t : All()) {
    if (t->group != group || t->Version(version) == nullptr) continue;
    json content = {{"application/json-patch+json", {{"schema", json::object()}}},
                    {"application/merge-patch+json", {{"schema", json::object()}}},
                    {"application/apply-patch+yaml", {{"schema", json::object()}}}};
    json patch = {{"x-kubernetes-group-version-kind", {{"group", group}, {"version", version}, {"kind", t->kind}}},
                  {"x-kubernetes-action", "patch"},
                  {"parameters",
                   {{{"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
                    {{"name", "fieldManager"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
                    {{"name", "dryRun"}, {"in", "query"}, {"schema", {{"type", "string"}}}}}},
                  {"requestBody", {{"content", content}, {"required", true}}},
                  {"responses", {{"200", {{"description", "OK"}}}}}};
    const std::string collection =
        prefix + (t->namespaced ? "/namespaces/{namespace}/" : "/") + t->plural;
    paths[collection + "/{name}"] = {{"patch", patch}};
  }
  if (paths.empty()) return std::nullopt;
  return json{{"openapi", "3.0.0"},
              {"info", {{"title", "Kubernetes"}, {"version", "v1.32.0"}}},
              {"paths", paths},
              {"components", {{"schemas", json::object()}}}};
}

}  // namespace star::apiserver
