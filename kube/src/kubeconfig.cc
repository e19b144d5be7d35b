// Client options from a kubeconfig file (yaml-cpp) or from the pod's service account.
// yaml-cpp exceptions are converted to Status here.
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "star/kube/client.h"

namespace star::kube {
namespace {

namespace fs = std::filesystem;

StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path.string() + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::NotFound(path.string() + ": cannot be read");
  return text.str();
}

std::string TrimNewlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// Reads one kubeconfig; every error names the file and the field.
class Kubeconfig {
 public:
  Kubeconfig(std::string path, YAML::Node root) : path_(std::move(path)), root_(std::move(root)) {}

  StatusOr<ClientOptions> Options(const std::string& context_name) {
    std::string name = context_name;
    if (name.empty()) {
      STAR_ASSIGN_OR_RETURN(name, OptionalString(root_, "current-context", "current-context"));
      if (name.empty()) return Bad("current-context", "not set (and no context was asked for)");
    }
    std::string ctx_field;
    STAR_ASSIGN_OR_RETURN(YAML::Node context, Named("contexts", "context", name, &ctx_field));
    STAR_ASSIGN_OR_RETURN(std::string cluster_name, RequiredString(context, "cluster", ctx_field + ".cluster"));
    STAR_ASSIGN_OR_RETURN(std::string user_name, OptionalString(context, "user", ctx_field + ".user"));
    STAR_ASSIGN_OR_RETURN(std::string ns, OptionalString(context, "namespace", ctx_field + ".namespace"));

    ClientOptions options;
    if (!ns.empty()) options.default_namespace = ns;

    std::string cl_field;
    STAR_ASSIGN_OR_RETURN(YAML::Node cluster, Named("clusters", "cluster", cluster_name, &cl_field));
    STAR_ASSIGN_OR_RETURN(options.server, RequiredString(cluster, "server", cl_field + ".server"));
    STAR_ASSIGN_OR_RETURN(std::string ca, OptionalString(cluster, "certificate-authority", cl_field + ".certificate-authority"));
    if (!ca.empty()) options.ca_file = Resolve(ca).string();
    STAR_ASSIGN_OR_RETURN(std::string ca_data,
                          OptionalString(cluster, "certificate-authority-data", cl_field + ".certificate-authority-data"));
    if (!ca_data.empty()) {
      const std::vector<unsigned char> pem = YAML::DecodeBase64(ca_data);
      if (pem.empty()) return Bad(cl_field + ".certificate-authority-data", "not base64");
      options.ca_data.assign(pem.begin(), pem.end());
    }
    if (cluster["insecure-skip-tls-verify"]) {
      try {
        options.insecure_skip_tls_verify = cluster["insecure-skip-tls-verify"].as<bool>();
      } catch (const YAML::Exception&) {
        return Bad(cl_field + ".insecure-skip-tls-verify", "not a boolean");
      }
    }

    if (user_name.empty()) return options;  // anonymous
    std::string user_field;
    STAR_ASSIGN_OR_RETURN(YAML::Node user, Named("users", "user", user_name, &user_field));
    STAR_ASSIGN_OR_RETURN(options.token, OptionalString(user, "token", user_field + ".token"));
    STAR_ASSIGN_OR_RETURN(std::string token_file, OptionalString(user, "tokenFile", user_field + ".tokenFile"));
    if (options.token.empty() && !token_file.empty()) {
      auto token = ReadFile(Resolve(token_file));
      if (!token.ok()) return Bad(user_field + ".tokenFile", token.status().message());
      options.token = TrimNewlines(*token);
      if (options.token.empty()) return Bad(user_field + ".tokenFile", Resolve(token_file).string() + " is empty");
    }
    if (options.token.empty()) {
      if (user["client-certificate"] || user["client-certificate-data"] || user["client-key"] ||
          user["client-key-data"]) {
        return Bad(user_field, "no token (client certificates are not supported)");
      }
      if (user["exec"] || user["auth-provider"]) return Bad(user_field, "no token (exec and auth-provider plugins are not supported)");
      if (user["username"] || user["password"]) return Bad(user_field, "no token (basic authentication is not supported)");
    }
    return options;
  }

 private:
  Status Bad(const std::string& field, const std::string& why) const {
    return Status::InvalidArgument("kubeconfig " + path_ + ": " + field + ": " + why);
  }

  fs::path Resolve(const std::string& file) const {
    const fs::path p(file);
    return p.is_absolute() ? p : fs::path(path_).parent_path() / p;
  }

  StatusOr<std::string> OptionalString(const YAML::Node& map, const std::string& key, const std::string& field) const {
    if (!map.IsMap() || !map[key] || map[key].IsNull()) return std::string();
    if (!map[key].IsScalar()) return Bad(field, "not a string");
    return map[key].Scalar();
  }

  StatusOr<std::string> RequiredString(const YAML::Node& map, const std::string& key, const std::string& field) const {
    STAR_ASSIGN_OR_RETURN(std::string value, OptionalString(map, key, field));
    if (value.empty()) return Bad(field, "missing");
    return value;
  }

  // The `inner` map of the entry of list `list` named `name`; *field = "list[i].inner".
  StatusOr<YAML::Node> Named(const std::string& list, const std::string& inner, const std::string& name,
                             std::string* field) const {
    const YAML::Node entries = root_[list];
    if (!entries || !entries.IsSequence()) return Bad(list, "missing (need an entry named \"" + name + "\")");
    for (size_t i = 0; i < entries.size(); ++i) {
      const YAML::Node entry = entries[i];
      const std::string at = list + "[" + std::to_string(i) + "]";
      if (!entry.IsMap()) return Bad(at, "not a map");
      STAR_ASSIGN_OR_RETURN(std::string entry_name, OptionalString(entry, "name", at + ".name"));
      if (entry_name != name) continue;
      *field = at + "." + inner;
      const YAML::Node value = entry[inner];
      if (!value || !value.IsMap()) return Bad(*field, "missing");
      return value;
    }
    return Bad(list, "no entry named \"" + name + "\"");
  }

  std::string path_;
  YAML::Node root_;
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

StatusOr<ClientOptions> OptionsFromKubeconfig(const std::string& path, const std::string& context) {
  std::string file = path;
  if (file.empty() && !Env("KUBECONFIG").empty()) {
    // As kubectl: a set $KUBECONFIG names the files; ~/.kube/config is not tried then.
    std::stringstream entries(Env("KUBECONFIG"));
    std::string entry;
    while (std::getline(entries, entry, ':')) {
      std::error_code ec;
      if (!entry.empty() && fs::exists(entry, ec)) {
        file = entry;
        break;
      }
    }
    if (file.empty()) return Status::NotFound("kubeconfig: no file of $KUBECONFIG (" + Env("KUBECONFIG") + ") exists");
  }
  if (file.empty()) {
    const std::string home = Env("HOME");
    if (home.empty()) return Status::NotFound("kubeconfig: $KUBECONFIG and $HOME are not set");
    file = home + "/.kube/config";
  }
  std::error_code ec;
  if (!fs::exists(file, ec)) return Status::NotFound("kubeconfig " + file + ": no such file");
  auto text = ReadFile(file);
  if (!text.ok()) return Status::InvalidArgument("kubeconfig " + text.status().message());
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("kubeconfig " + file + ": not YAML: " + e.what());
  }
  if (!root.IsMap()) return Status::InvalidArgument("kubeconfig " + file + ": not a map");
  try {
    return Kubeconfig(file, root).Options(context);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("kubeconfig " + file + ": " + e.what());
  }
}

StatusOr<ClientOptions> InClusterOptions(const std::string& root) {
  const std::string host = Env("KUBERNETES_SERVICE_HOST"), port = Env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return Status::FailedPrecondition(
        "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not running in a pod)");
  }
  const fs::path dir(root);
  auto token = ReadFile(dir / "token");
  if (!token.ok()) return Status::FailedPrecondition("in-cluster: service-account token " + token.status().message());
  ClientOptions options;
  options.server = "https://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
  options.token = TrimNewlines(*token);
  if (options.token.empty()) return Status::FailedPrecondition("in-cluster: " + (dir / "token").string() + " is empty");
  std::error_code ec;
  if (fs::exists(dir / "ca.crt", ec)) options.ca_file = (dir / "ca.crt").string();
  if (auto ns = ReadFile(dir / "namespace"); ns.ok() && !TrimNewlines(*ns).empty()) {
    options.default_namespace = TrimNewlines(*ns);
  }
  return options;
}

}  // namespace star::kube
