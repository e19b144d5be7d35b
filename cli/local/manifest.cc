#include "local/manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>

#include "star/core/api/json_reader.h"
#include "star/yaml/to_json.h"

namespace star::local {
namespace {

using nlohmann::json;

constexpr size_t kMaxFileBytes = 16 << 20;

// containers[0] of a validated pod template, or nullptr when it has none.
const json* FirstContainerJson(const json& pod_template) {
  const auto spec = pod_template.find("spec");
  if (spec == pod_template.end() || !spec->is_object()) return nullptr;
  const auto containers = spec->find("containers");
  if (containers == spec->end() || !containers->is_array() || containers->empty()) return nullptr;
  return &containers->front();
}

// Limit, else request, else 0 (a 0 quantity counts as not given).
int64_t CpuOf(const api::ContainerSummary& c) {
  if (c.cpu_limit_millicores.value_or(0) > 0) return *c.cpu_limit_millicores;
  return c.cpu_request_millicores.value_or(0);
}

// The container's env as name/value pairs; `path` names the container.
Status ReadEnv(const json& container, const std::string& path,
               std::vector<std::pair<std::string, std::string>>* out) {
  if (container.contains("envFrom")) {
    return Status::InvalidArgument(path + ".envFrom: not supported by star local (list the "
                                   "variables under env with literal values)");
  }
  const auto env = container.find("env");
  if (env == container.end() || env->is_null()) return Status::Ok();
  const std::string env_path = path + ".env";
  if (!env->is_array()) {
    return Status::InvalidArgument(env_path + ": must be an array, got " + api::JsonTypeName(*env));
  }
  for (size_t i = 0; i < env->size(); ++i) {
    api::ObjectReader rd((*env)[i], api::IndexPath(env_path, i));
    std::string name, value;
    rd.String("name", &name);
    if (rd.ok() && name.empty()) rd.Fail("name", "must not be empty");
    if (rd.ok() && rd.Has("valueFrom")) {
      rd.Fail("valueFrom", "not supported by star local (give a literal value)");
    }
    if (const json* v = rd.Get("value"); rd.ok() && v != nullptr && !v->is_string()) {
      rd.Fail("value", "must be a string (quote it: \"" + v->dump() + "\"), got " + api::JsonTypeName(*v));
    }
    rd.String("value", &value, api::Need::kOptional).RejectUnknown({"name", "value", "valueFrom"});
    if (!rd.ok()) return rd.status();
    out->emplace_back(std::move(name), std::move(value));
  }
  return Status::Ok();
}

// Command, env and CPU of a decoded (hence validated) job.
Status ReadTemplates(LocalJob* local) {
  const api::TrainingJobSpec& spec = local->job.spec;
  if (spec.workers.pod_template) {
    const std::string path = "spec.workers.template";
    STAR_ASSIGN_OR_RETURN(std::optional<api::ContainerSummary> c,
                          api::FirstContainer(*spec.workers.pod_template, path));
    if (c) {
      const std::string container = path + ".spec.containers[0]";
      if (c->command.empty() && !c->args.empty()) {
        return Status::InvalidArgument(container + ".args: needs a command in star local (there is "
                                       "no image entrypoint; drop args to run the bundled trainer)");
      }
      local->worker_command = c->command;
      local->worker_command.insert(local->worker_command.end(), c->args.begin(), c->args.end());
      local->worker_cpu_millicores = CpuOf(*c);
      if (const json* raw = FirstContainerJson(*spec.workers.pod_template)) {
        STAR_RETURN_IF_ERROR(ReadEnv(*raw, container, &local->worker_env));
      }
    }
  }
  if (spec.parameter_servers && spec.parameter_servers->pod_template) {
    STAR_ASSIGN_OR_RETURN(std::optional<api::ContainerSummary> c,
                          api::FirstContainer(*spec.parameter_servers->pod_template,
                                              "spec.parameterServers.template"));
    if (c) local->server_cpu_millicores = CpuOf(*c);
  }
  return Status::Ok();
}

std::string DocumentList(const std::vector<size_t>& indices) {
  std::string out;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (i > 0) out += i + 1 == indices.size() ? " and " : ", ";
    out += std::to_string(indices[i] + 1);
  }
  return out;
}

}  // namespace


StatusOr<LocalJob> ParseManifest(std::string_view text, const std::string& name) {
  STAR_ASSIGN_OR_RETURN(std::vector<json> docs, yaml::ToJson(text, name));
  std::vector<size_t> present, jobs;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (docs[i].is_null()) continue;
    present.push_back(i);
    const json& d = docs[i];
    const auto kind = d.is_object() ? d.find("kind") : d.end();
    if (kind != d.end() && kind->is_string() &&
        kind->get_ref<const std::string&>() == api::kTrainingJobKind) {
      jobs.push_back(i);
    }
  }
  if (present.empty()) return Status::InvalidArgument(name + ": no TrainingJob document (the file is empty)");
  size_t pick = present[0];
  if (present.size() > 1) {
    if (jobs.empty()) {
      return Status::InvalidArgument(name + ": none of its " + std::to_string(present.size()) +
                                     " documents has kind TrainingJob");
    }
    if (jobs.size() > 1) {
      return Status::InvalidArgument(name + ": documents " + DocumentList(jobs) +
                                     " all have kind TrainingJob; star local runs one job per file");
    }
    pick = jobs[0];
  }
  StatusOr<api::TrainingJob> job = api::TrainingJobFromJson(docs[pick]);
  if (!job.ok()) return job.status().WithPrefix(name);
  LocalJob local;
  local.job = *std::move(job);
  if (Status s = ReadTemplates(&local); !s.ok()) return s.WithPrefix(name);
  return local;
}

StatusOr<LocalJob> LoadManifest(const std::string& path) {
  const auto cannot_read = [&path](int err) {
    const std::string m = path + ": cannot read: " + std::strerror(err);
    return err == ENOENT ? Status::NotFound(m) : Status::InvalidArgument(m);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return cannot_read(errno);
  std::string text;
  char buf[1 << 16];
  int err = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxFileBytes) {
      ::close(fd);
      return Status::InvalidArgument(path + ": cannot read: larger than 16 MiB");
    }
  }
  ::close(fd);
  if (err != 0) return cannot_read(err);
  return ParseManifest(text, path);
}

}  // namespace star::local
