#include "object_types.h"

#include <cctype>

namespace star::apiserver {
namespace {

using nlohmann::json;

// The type table. A spec is a leaf type name ("string", "integer", "boolean", "number",
// "int-or-string", "quantity" (string or number), "bytes" (base64 string), "object" (any
// object, not looked into)), "#Name" (a definition below), [spec] (a list of spec), an
// object {"field": spec, ...} (a struct: other fields are not checked) or {"*": spec} (a
// map of spec). "<group>/<version>/<Kind>" keys hold the kinds' own fields.
const json& Table() {
  static const json table = json::parse(R"({
  "#ObjectMeta": {"name": "string", "generateName": "string", "namespace": "string", "selfLink": "string",
    "uid": "string", "resourceVersion": "string", "generation": "integer", "creationTimestamp": "string",
    "deletionTimestamp": "string", "deletionGracePeriodSeconds": "integer", "labels": {"*": "string"},
    "annotations": {"*": "string"}, "finalizers": ["string"],
    "ownerReferences": [{"apiVersion": "string", "kind": "string", "name": "string", "uid": "string",
                         "controller": "boolean", "blockOwnerDeletion": "boolean"}],
    "managedFields": [{"manager": "string", "operation": "string", "apiVersion": "string", "time": "string",
                       "fieldsType": "string", "fieldsV1": "object", "subresource": "string"}]},
  "#Condition": {"type": "string", "status": "string", "reason": "string", "message": "string",
    "lastTransitionTime": "string", "lastProbeTime": "string", "lastHeartbeatTime": "string",
    "observedGeneration": "integer"},
  "#ObjectReference": {"kind": "string", "namespace": "string", "name": "string", "uid": "string",
    "apiVersion": "string", "resourceVersion": "string", "fieldPath": "string"},
  "#Container": {"name": "string", "image": "string", "imagePullPolicy": "string", "command": ["string"],
    "args": ["string"], "workingDir": "string", "stdin": "boolean", "tty": "boolean",
    "ports": [{"name": "string", "containerPort": "integer", "hostPort": "integer", "protocol": "string",
               "hostIP": "string"}],
    "env": [{"name": "string", "value": "string", "valueFrom": "object"}],
    "envFrom": [{"prefix": "string", "configMapRef": "object", "secretRef": "object"}],
    "resources": {"limits": {"*": "quantity"}, "requests": {"*": "quantity"}},
    "volumeMounts": [{"name": "string", "mountPath": "string", "readOnly": "boolean", "subPath": "string"}],
    "livenessProbe": "object", "readinessProbe": "object", "startupProbe": "object",
    "securityContext": "object", "lifecycle": "object"},
  "#DeleteOptions": {"apiVersion": "string", "kind": "string", "propagationPolicy": "string",
    "orphanDependents": "boolean", "gracePeriodSeconds": "integer", "dryRun": ["string"],
    "preconditions": {"uid": "string", "resourceVersion": "string"}},
  "#EventSeries": {"count": "integer", "lastObservedTime": "string"},
  "/v1/Pod": {
    "spec": {"nodeName": "string", "serviceAccountName": "string", "serviceAccount": "string",
      "restartPolicy": "string", "schedulerName": "string", "hostname": "string", "subdomain": "string",
      "priority": "integer", "priorityClassName": "string", "hostNetwork": "boolean",
      "terminationGracePeriodSeconds": "integer", "activeDeadlineSeconds": "integer",
      "nodeSelector": {"*": "string"}, "containers": ["#Container"], "initContainers": ["#Container"],
      "volumes": [{"name": "string"}], "imagePullSecrets": [{"name": "string"}],
      "tolerations": [{"key": "string", "operator": "string", "value": "string", "effect": "string",
                       "tolerationSeconds": "integer"}],
      "affinity": "object", "securityContext": "object"},
    "status": {"phase": "string", "message": "string", "reason": "string", "hostIP": "string",
      "podIP": "string", "podIPs": [{"ip": "string"}], "startTime": "string", "qosClass": "string",
      "nominatedNodeName": "string", "conditions": ["#Condition"],
      "containerStatuses": [{"name": "string", "ready": "boolean", "restartCount": "integer",
        "image": "string", "imageID": "string", "containerID": "string", "started": "boolean",
        "state": "object", "lastState": "object"}]}},
  "/v1/Service": {
    "spec": {"type": "string", "clusterIP": "string", "clusterIPs": ["string"], "selector": {"*": "string"},
      "ports": [{"name": "string", "protocol": "string", "port": "integer", "targetPort": "int-or-string",
                 "nodePort": "integer", "appProtocol": "string"}],
      "sessionAffinity": "string", "externalName": "string", "externalIPs": ["string"],
      "publishNotReadyAddresses": "boolean", "ipFamilies": ["string"], "ipFamilyPolicy": "string",
      "internalTrafficPolicy": "string", "externalTrafficPolicy": "string"},
    "status": {"loadBalancer": {"ingress": [{"ip": "string", "hostname": "string"}]},
      "conditions": ["#Condition"]}},
  "/v1/ConfigMap": {"data": {"*": "string"}, "binaryData": {"*": "bytes"}, "immutable": "boolean"},
  "/v1/Secret": {"data": {"*": "bytes"}, "stringData": {"*": "string"}, "type": "string",
    "immutable": "boolean"},
  "/v1/Namespace": {"spec": {"finalizers": ["string"]},
    "status": {"phase": "string", "conditions": ["#Condition"]}},
  "/v1/Node": {
    "spec": {"podCIDR": "string", "podCIDRs": ["string"], "providerID": "string", "unschedulable": "boolean",
      "taints": [{"key": "string", "value": "string", "effect": "string", "timeAdded": "string"}]},
    "status": {"capacity": {"*": "quantity"}, "allocatable": {"*": "quantity"}, "phase": "string",
      "conditions": ["#Condition"], "addresses": [{"type": "string", "address": "string"}],
      "nodeInfo": {"*": "string"}}},
  "/v1/Event": {"involvedObject": "#ObjectReference", "related": "#ObjectReference", "reason": "string",
    "message": "string", "source": {"component": "string", "host": "string"}, "firstTimestamp": "string",
    "lastTimestamp": "string", "count": "integer", "type": "string", "eventTime": "string",
    "series": "#EventSeries", "action": "string", "reportingComponent": "string",
    "reportingInstance": "string"},
  "events.k8s.io/v1/Event": {"eventTime": "string", "series": "#EventSeries",
    "reportingController": "string", "reportingInstance": "string", "action": "string", "reason": "string",
    "regarding": "#ObjectReference", "related": "#ObjectReference", "note": "string", "type": "string",
    "deprecatedSource": {"component": "string", "host": "string"}, "deprecatedFirstTimestamp": "string",
    "deprecatedLastTimestamp": "string", "deprecatedCount": "integer"},
  "coordination.k8s.io/v1/Lease": {"spec": {"holderIdentity": "string", "leaseDurationSeconds": "integer",
    "acquireTime": "string", "renewTime": "string", "leaseTransitions": "integer", "strategy": "string",
    "preferredHolder": "string"}}
})");
  return table;
}

// The JSON type as Go's decoder names it in its messages.
std::string JsonKind(const json& v) {
  switch (v.type()) {
    case json::value_t::boolean: return "bool";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "number";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    default: return "null";
  }
}

// The offset of the first byte that is not standard base64 (with '=' padding at the
// end), or npos.
size_t BadBase64At(const std::string& s) {
  size_t pad = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '=') {
      ++pad;
    } else if (pad > 0 || !(std::isalnum(c) || c == '+' || c == '/')) {
      return i;
    }
  }
  if (s.size() % 4 != 0 || pad > 2) return s.size() - (s.size() % 4 == 0 ? 1 : s.size() % 4);
  return std::string::npos;
}

class Checker {
 public:
  explicit Checker(std::string prefix) : prefix_(std::move(prefix)) {}
  std::optional<std::string> error;

  // Checks `value` (not null) against `spec` at `path`; false with `error` set at the
  // first mismatch.
  bool Check(const json& spec, json& value, const std::string& path) {
    if (spec.is_string()) return Leaf(spec.get<std::string>(), value, path);
    if (spec.is_array()) {
      if (!value.is_array()) return Fail(value, path, "array");
      for (size_t i = 0; i < value.size(); ++i) {
        if (value[i].is_null()) continue;
        if (!Check(spec[0], value[i], path + "[" + std::to_string(i) + "]")) return false;
      }
      return true;
    }
    if (!value.is_object()) return Fail(value, path, spec.contains("*") ? "map" : "object");
    if (spec.contains("*")) return Map(spec["*"], value, path);
    for (const auto& [field, sub] : spec.items()) {
      auto it = value.find(field);
      if (it == value.end()) continue;
      if (it->is_null()) {
        value.erase(it);
      } else if (!Check(sub, *it, path.empty() ? field : path + "." + field)) {
        return false;
      }
    }
    return true;
  }

 private:
  bool Map(const json& spec, json& value, const std::string& path) {
    for (auto& [key, item] : value.items()) {
      if (item.is_null() && spec.is_string()) item = "";
      if (!item.is_null() && !Check(spec, item, path + "[" + key + "]")) return false;
    }
    return true;
  }

  bool Leaf(const std::string& type, json& value, const std::string& path) {
    if (type[0] == '#') return Check(Table().at(type), value, path);
    if (type == "string") return value.is_string() || Fail(value, path, "string");
    if (type == "integer") return value.is_number_integer() || Fail(value, path, "int64");
    if (type == "number") return value.is_number() || Fail(value, path, "float64");
    if (type == "boolean") return value.is_boolean() || Fail(value, path, "bool");
    if (type == "object") return value.is_object() || Fail(value, path, "object");
    if (type == "int-or-string") {
      return value.is_number_integer() || value.is_string() || Fail(value, path, "intstr.IntOrString");
    }
    if (type == "quantity") return value.is_number() || value.is_string() || Fail(value, path, "resource.Quantity");
    if (type == "bytes") {
      if (!value.is_string()) return Fail(value, path, "[]uint8");
      const size_t at = BadBase64At(value.get<std::string>());
      if (at == std::string::npos) return true;
      error = prefix_ + "illegal base64 data at input byte " + std::to_string(at) + " in field " + path;
      return false;
    }
    return true;
  }

  bool Fail(const json& value, const std::string& path, const std::string& go_type) {
    error = prefix_ + "json: cannot unmarshal " + JsonKind(value) + " into Go struct field " + path + " of type " +
            go_type;
    return false;
  }

  std::string prefix_;
};

}  // namespace

std::optional<std::string> GoTypeError(const ResourceType& type, const std::string& version, json& object) {
  Checker checker(type.kind + " in version \"" + version + "\" cannot be handled as a " + type.kind + ": ");
  json spec = {{"apiVersion", "string"}, {"kind", "string"}, {"metadata", "#ObjectMeta"}};
  if (type.builtin) {
    auto own = Table().find(type.group + "/" + version + "/" + type.kind);
    if (own != Table().end()) spec.update(*own);
  }
  if (!object.is_object()) {
    return checker.Check(json::object(), object, type.kind) ? std::nullopt : checker.error;
  }
  json rooted = {{type.kind, spec}};
  json wrapper = {{type.kind, std::move(object)}};
  const bool ok = checker.Check(rooted, wrapper, "");
  object = std::move(wrapper[type.kind]);
  return ok ? std::nullopt : checker.error;
}

std::optional<std::string> DeleteOptionsTypeError(json& body) {
  Checker checker("DeleteOptions cannot be decoded: ");
  json wrapper = {{"DeleteOptions", std::move(body)}};
  const bool ok = checker.Check(json{{"DeleteOptions", "#DeleteOptions"}}, wrapper, "");
  body = std::move(wrapper["DeleteOptions"]);
  return ok ? std::nullopt : checker.error;
}

}  // namespace star::apiserver
