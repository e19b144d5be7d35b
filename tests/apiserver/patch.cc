#include "patch.h"

#include <algorithm>
#include <set>
#include <string>

#include "request_limits.h"

namespace star::apiserver {
namespace {

using nlohmann::json;

bool IsDirective(const std::string& key) {
  return key == "$patch" || key == "$retainKeys" || key.rfind("$setElementOrder/", 0) == 0 ||
         key.rfind("$deleteFromPrimitiveList/", 0) == 0;
}

// The patch without directives, for values that are inserted rather than merged.
json Clean(const json& v) {
  if (v.is_object()) {
    json out = json::object();
    for (const auto& [k, item] : v.items()) {
      if (!IsDirective(k)) out[k] = Clean(item);
    }
    return out;
  }
  if (v.is_array()) {
    json out = json::array();
    for (const auto& item : v) out.push_back(Clean(item));
    return out;
  }
  return v;
}

// The merge key of a list field, "" for lists that are replaced whole.
std::string MergeKey(const std::string& field, const json& a, const json& b) {
  if (field == "ports") {
    for (const json* list : {&a, &b}) {
      for (const auto& item : *list) {
        if (item.is_object() && item.contains("containerPort")) return "containerPort";
      }
    }
    return "port";
  }
  if (field == "containers" || field == "initContainers" || field == "ephemeralContainers" ||
      field == "volumes" || field == "env" || field == "imagePullSecrets") {
    return "name";
  }
  if (field == "volumeMounts") return "mountPath";
  if (field == "volumeDevices") return "devicePath";
  if (field == "conditions") return "type";
  if (field == "ownerReferences") return "uid";
  if (field == "hostAliases") return "ip";
  if (field == "topologySpreadConstraints") return "topologyKey";
  return "";
}

json MergeObject(json target, const json& patch);

json MergeList(const std::string& field, const json& current, const json& patch) {
  const json cur = current.is_array() ? current : json::array();
  if (field == "finalizers") {
    json out = cur;
    for (const auto& v : patch) {
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    }
    return out;
  }
  for (const auto& item : patch) {
    if (item.is_object() && item.value("$patch", "") == "replace") {
      json out = json::array();
      for (const auto& other : patch) {
        if (!(other.is_object() && other.contains("$patch"))) out.push_back(Clean(other));
      }
      return out;
    }
  }
  const std::string key = MergeKey(field, cur, patch);
  if (key.empty()) return Clean(patch);
  json out = cur;
  for (const auto& item : patch) {
    if (!item.is_object() || !item.contains(key)) {
      out.push_back(Clean(item));
      continue;
    }
    auto it = std::find_if(out.begin(), out.end(), [&](const json& e) {
      return e.is_object() && e.contains(key) && e[key] == item[key];
    });
    if (item.value("$patch", "") == "delete") {
      if (it != out.end()) out.erase(it);
    } else if (it != out.end()) {
      *it = MergeObject(*it, item);
    } else {
      out.push_back(Clean(item));
    }
  }
  return out;
}

json MergeObject(json target, const json& patch) {
  if (!patch.is_object()) return patch;
  if (patch.value("$patch", "") == "replace") return Clean(patch);
  if (!target.is_object()) target = json::object();
  for (const auto& [key, value] : patch.items()) {
    if (key.rfind("$deleteFromPrimitiveList/", 0) == 0) {
      const std::string list = key.substr(std::string("$deleteFromPrimitiveList/").size());
      if (target.contains(list) && target[list].is_array() && value.is_array()) {
        json kept = json::array();
        for (const auto& v : target[list]) {
          if (std::find(value.begin(), value.end(), v) == value.end()) kept.push_back(v);
        }
        target[list] = kept;
      }
      continue;
    }
    if (IsDirective(key)) continue;
    if (value.is_null() || (value.is_object() && value.value("$patch", "") == "delete")) {
      target.erase(key);
    } else if (value.is_object()) {
      target[key] = MergeObject(target.contains(key) ? target[key] : json::object(), value);
    } else if (value.is_array()) {
      target[key] = MergeList(key, target.contains(key) ? target[key] : json::array(), value);
    } else {
      target[key] = value;
    }
  }
  if (patch.contains("$retainKeys") && patch["$retainKeys"].is_array()) {
    std::set<std::string> keep;
    for (const auto& k : patch["$retainKeys"]) {
      if (k.is_string()) keep.insert(k.get<std::string>());
    }
    for (auto it = target.begin(); it != target.end();) {
      if (keep.count(it.key()) == 0) {
        it = target.erase(it);
      } else {
        ++it;
      }
    }
  }
  return target;
}

}  // namespace

json ApplyMergePatch(json target, const json& patch) {
  target.merge_patch(patch);
  return target;
}

StatusOr<json> ApplyJsonPatch(const json& target, const json& patch) {
  if (!patch.is_array()) return Status::InvalidArgument("json patch: the patch must be an array of operations");
  if (patch.size() > kMaxJsonPatchOperations) {
    return Status::OutOfRange("The allowed maximum operations in a JSON patch is " +
                              std::to_string(kMaxJsonPatchOperations) + ", got " + std::to_string(patch.size()));
  }
  json result = target;
  size_t copied = 0;
  try {
    for (const auto& op : patch) {
      if (op.is_object() && op.value("op", json()) == "copy" && op.contains("from") && op["from"].is_string()) {
        copied += result.at(json::json_pointer(op["from"].get<std::string>())).dump().size();
        if (copied > kMaxBodyBytes) {
          return Status::OutOfRange("json patch: the values copied add up to more than " +
                                    std::to_string(kMaxBodyBytes) + " bytes");
        }
      }
      result.patch_inplace(json::array({op}));
    }
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("json patch: ") + e.what());
  }
  return result;
}

StatusOr<json> ApplyStrategicMergePatch(json target, const json& patch) {
  if (!patch.is_object()) return Status::InvalidArgument("strategic merge patch: the patch must be an object");
  return MergeObject(std::move(target), patch);
}

}  // namespace star::apiserver
