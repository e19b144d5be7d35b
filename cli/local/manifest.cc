#include "local/manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <exception>
#include <optional>

#include <yaml-cpp/yaml.h>

#include "star/core/api/json_reader.h"
#include "star/yaml/syntax.h"

namespace star::local {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 512;
constexpr size_t kMaxValues = 1'000'000;
constexpr size_t kMaxFileBytes = 16 << 20;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Consumes [0-9]+ at s[*i]; false when there is no digit.
bool Digits(std::string_view s, size_t* i) {
  const size_t from = *i;
  while (*i < s.size() && IsDigit(s[*i])) ++*i;
  return *i > from;
}

// YAML 1.2 core schema int: [-+]?[0-9]+ (decimal only).
bool LooksLikeInt(std::string_view s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  return Digits(s, &i) && i == s.size();
}

// YAML 1.2 core schema float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool LooksLikeFloat(std::string_view s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!Digits(s, &i)) return false;
  } else {
    if (!Digits(s, &i)) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      Digits(s, &i);
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!Digits(s, &i)) return false;
  }
  return i == s.size();
}

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF),
// the only text a JSON value may hold (nlohmann::json::dump throws on anything else).
bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return false;
    }
    if (s.size() - i <= n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return false;
    }
    i += n + 1;
  }
  return true;
}

std::string_view WithoutPlus(std::string_view s) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  return s;
}

// A scalar's JSON value under the rules documented on YamlToJson.
json ScalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  const std::string& tag = node.Tag();
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return s;  // quoted, block or !!str
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  const std::string_view v = WithoutPlus(s);
  if (LooksLikeInt(s)) {
    int64_t i = 0;
    const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), i);
    if (ec == std::errc() && ptr == v.data() + v.size()) return i;
    // Too large for int64: read it as a number below.
  }
  if (LooksLikeInt(s) || LooksLikeFloat(s)) {
    double d = 0;
    const auto [ptr, ec] =
        std::from_chars(v.data(), v.data() + v.size(), d, std::chars_format::general);
    if (ec == std::errc() && ptr == v.data() + v.size() && std::isfinite(d)) return d;
  }
  return s;
}

// Converts one document, keeping the first error.
class Converter {
 public:
  explicit Converter(const std::string& name) : name_(name) {}

  const Status& status() const { return status_; }

  bool Convert(const YAML::Node& node, int depth, json* out) {
    if (++values_ > kMaxValues) {
      return Fail(node, "more than " + std::to_string(kMaxValues) +
                            " values (aliases expanding too far?)");
    }
    if (depth > kMaxDepth) return Fail(node, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        *out = nullptr;
        return true;
      case YAML::NodeType::Scalar:
        if (!IsUtf8(node.Scalar())) return Fail(node, "not valid UTF-8");
        *out = ScalarToJson(node);
        return true;
      case YAML::NodeType::Sequence: {
        *out = json::array();
        for (const YAML::Node& item : node) {
          json v;
          if (!Convert(item, depth + 1, &v)) return false;
          out->push_back(std::move(v));
        }
        return true;
      }
      case YAML::NodeType::Map: {
        *out = json::object();
        for (const auto& entry : node) {
          const YAML::Node key = entry.first;  // Nodes are handles: copies are cheap
          if (!key.IsScalar()) return Fail(key, "mapping keys must be scalars");
          if (!IsUtf8(key.Scalar())) return Fail(key, "not valid UTF-8");
          if (out->contains(key.Scalar())) return Fail(key, "duplicate key \"" + key.Scalar() + "\"");
          json v;
          if (!Convert(entry.second, depth + 1, &v)) return false;
          (*out)[key.Scalar()] = std::move(v);
        }
        return true;
      }
    }
    return Fail(node, "unsupported YAML node");
  }

 private:
  bool Fail(const YAML::Node& at, const std::string& reason) {
    const YAML::Mark m = at.Mark();
    const std::string where =
        m.is_null() ? name_
                    : name_ + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
    status_ = Status::InvalidArgument(where + ": " + reason);
    return false;
  }

  const std::string& name_;
  Status status_;
  size_t values_ = 0;
};

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

StatusOr<std::vector<json>> YamlToJson(std::string_view text, const std::string& name) {
  STAR_RETURN_IF_ERROR(yaml::CheckSyntax(text, name));  // before yaml-cpp: see star/yaml/syntax.h
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return Status::InvalidArgument(name + ": " + e.msg);
    return Status::InvalidArgument(name + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(name + ": cannot parse YAML: " + e.what());
  }
  std::vector<json> out;
  out.reserve(docs.size());
  for (const YAML::Node& d : docs) {
    Converter c(name);
    json j;
    if (!c.Convert(d, 0, &j)) return c.status();
    out.push_back(std::move(j));
  }
  return out;
}

StatusOr<LocalJob> ParseManifest(std::string_view text, const std::string& name) {
  STAR_ASSIGN_OR_RETURN(std::vector<json> docs, YamlToJson(text, name));
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
