#include "local/manifest.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "local/inject_spec.h"

namespace star::local {
namespace {

using nlohmann::json;

json ScalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: always a string
  if (s == "null" || s == "~" || s == "Null" || s == "NULL" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  // Integers, then numbers; anything else (e.g. "500m", "1.2.3") stays a string.
  try {
    size_t used = 0;
    long long i = std::stoll(s, &used, 10);
    if (used == s.size()) return static_cast<int64_t>(i);
  } catch (const std::exception&) {
  }
  try {
    size_t used = 0;
    double d = std::stod(s, &used);
    if (used == s.size() && s.find_first_of("xXnN") == std::string::npos) return d;
  } catch (const std::exception&) {
  }
  return s;
}

json NodeToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return ScalarToJson(node);
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& item : node) a.push_back(NodeToJson(item));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : node) o[kv.first.as<std::string>()] = NodeToJson(kv.second);
      return o;
    }
  }
  return nullptr;
}

StatusOr<int64_t> CpuOf(const nlohmann::json& quantity, const std::string& path) {
  if (quantity.is_number()) {
    const double cores = quantity.get<double>();
    if (cores <= 0) return Status::InvalidArgument(path + ": CPU quantity must be > 0");
    return static_cast<int64_t>(cores * 1000 + 0.5);
  }
  if (!quantity.is_string()) return Status::InvalidArgument(path + ": must be a CPU quantity");
  auto mc = ParseCpuQuantity(quantity.get<std::string>());
  if (!mc.ok()) return mc.status().WithPrefix(path);
  return mc;
}

// The first container's CPU limit (else request), in millicores; 0 when absent.
StatusOr<int64_t> TemplateCpu(const std::optional<json>& tmpl, const std::string& path) {
  if (!tmpl) return int64_t{0};
  const json* containers = nullptr;
  if (tmpl->contains("spec") && (*tmpl)["spec"].is_object() && (*tmpl)["spec"].contains("containers")) {
    containers = &(*tmpl)["spec"]["containers"];
  }
  if (containers == nullptr || !containers->is_array() || containers->empty()) return int64_t{0};
  const json& c = (*containers)[0];
  const std::string base = path + ".spec.containers[0].resources";
  if (!c.contains("resources") || !c["resources"].is_object()) return int64_t{0};
  const json& r = c["resources"];
  for (const char* which : {"limits", "requests"}) {
    if (r.contains(which) && r[which].is_object() && r[which].contains("cpu")) {
      return CpuOf(r[which]["cpu"], base + "." + which + ".cpu");
    }
  }
  return int64_t{0};
}

}  // namespace

StatusOr<json> YamlToJson(std::string_view text, const std::string& name) {
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(std::string(text));
    json out = json::array();
    for (const auto& d : docs) out.push_back(NodeToJson(d));
    return out;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(name + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

StatusOr<LocalJob> ParseManifest(std::string_view text, const std::string& name) {
  auto docs = YamlToJson(text, name);
  if (!docs.ok()) return docs.status();
  const json* doc = nullptr;
  std::vector<const json*> nonempty;
  for (const auto& d : *docs) {
    if (!d.is_null()) nonempty.push_back(&d);
  }
  if (nonempty.size() == 1) {
    doc = nonempty[0];
  } else {
    for (const json* d : nonempty) {
      if (d->is_object() && d->value("kind", "") == "TrainingJob") {
        if (doc != nullptr) return Status::InvalidArgument(name + ": more than one TrainingJob document");
        doc = d;
      }
    }
  }
  if (doc == nullptr) return Status::InvalidArgument(name + ": no TrainingJob document");
  if (!doc->is_object()) return Status::InvalidArgument(name + ": must be a TrainingJob object");
  auto job = api::TrainingJobFromJson(*doc);
  if (!job.ok()) return job.status().WithPrefix(name);
  LocalJob local;
  local.job = *job;
  const auto& spec = local.job.spec;
  if (spec.workers.pod_template) {
    auto c = api::FirstContainer(*spec.workers.pod_template, "spec.workers.template");
    if (!c.ok()) return c.status().WithPrefix(name);
    if (*c) {
      local.worker_command = (*c)->command;
      local.worker_command.insert(local.worker_command.end(), (*c)->args.begin(), (*c)->args.end());
      if (local.worker_command.empty() && !(*c)->args.empty()) {
        return Status::InvalidArgument(name + ": spec.workers.template.spec.containers[0].args: "
                                       "needs a command to run locally");
      }
    }
    const json& tmpl = *spec.workers.pod_template;
    const json* env = nullptr;
    if (tmpl.contains("spec") && tmpl["spec"].contains("containers") &&
        tmpl["spec"]["containers"].is_array() && !tmpl["spec"]["containers"].empty() &&
        tmpl["spec"]["containers"][0].contains("env")) {
      env = &tmpl["spec"]["containers"][0]["env"];
    }
    if (env != nullptr) {
      const std::string base = "spec.workers.template.spec.containers[0].env";
      if (!env->is_array()) return Status::InvalidArgument(name + ": " + base + ": must be a list");
      for (size_t i = 0; i < env->size(); ++i) {
        const json& e = (*env)[i];
        const std::string at = base + "[" + std::to_string(i) + "]";
        if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) {
          return Status::InvalidArgument(name + ": " + at + ".name: required string");
        }
        if (e.contains("valueFrom")) {
          return Status::InvalidArgument(name + ": " + at +
                                         ".valueFrom: not available in local mode (use value)");
        }
        std::string value;
        if (e.contains("value")) {
          if (e["value"].is_string()) value = e["value"].get<std::string>();
          else value = e["value"].dump();
        }
        local.worker_env.emplace_back(e["name"].get<std::string>(), value);
      }
    }
  }
  auto wcpu = TemplateCpu(spec.workers.pod_template, "spec.workers.template");
  if (!wcpu.ok()) return wcpu.status().WithPrefix(name);
  local.worker_cpu_millicores = *wcpu;
  if (spec.parameter_servers) {
    auto scpu = TemplateCpu(spec.parameter_servers->pod_template, "spec.parameterServers.template");
    if (!scpu.ok()) return scpu.status().WithPrefix(name);
    local.server_cpu_millicores = *scpu;
  }
  return local;
}

StatusOr<LocalJob> LoadManifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot read: " + std::strerror(errno));
  std::stringstream s;
  s << in.rdbuf();
  return ParseManifest(s.str(), path);
}

}  // namespace star::local
