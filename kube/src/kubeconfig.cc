// Client options from a kubeconfig file (yaml-cpp) or from the pod's service account.
// yaml-cpp exceptions are converted to Status here.
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "star/kube/client.h"
#include "star/yaml/syntax.h"

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
    STAR_ASSIGN_OR_RETURN(options.ca_data, Base64Field(cluster, "certificate-authority-data", cl_field));
    STAR_ASSIGN_OR_RETURN(options.insecure_skip_tls_verify,
                          OptionalBool(cluster, "insecure-skip-tls-verify", cl_field + ".insecure-skip-tls-verify"));
    if (cluster["tls-server-name"]) {
      return Bad(cl_field + ".tls-server-name", "not supported (the server's certificate must name its host)");
    }

    if (user_name.empty()) return options;  // anonymous
    std::string user_field;
    STAR_ASSIGN_OR_RETURN(YAML::Node user, Named("users", "user", user_name, &user_field));
    STAR_RETURN_IF_ERROR(ReadToken(user, user_field, &options));
    STAR_RETURN_IF_ERROR(ReadClientCertificate(user, user_field, &options));
    if (user["exec"]) {
      STAR_ASSIGN_OR_RETURN(ExecConfig exec, ReadExec(user["exec"], user_field + ".exec"));
      options.exec = std::move(exec);
    }
    if (user["auth-provider"]) return Bad(user_field + ".auth-provider", "not supported (use an exec plugin)");
    if (user["username"] || user["password"]) return Bad(user_field, "basic authentication is not supported");
  return options;
  }

 private:
  // token, or tokenFile (read now, and again by the client whenever it changes).
  Status ReadToken(const YAML::Node& user, const std::string& at, ClientOptions* options) const {
    STAR_ASSIGN_OR_RETURN(options->token, OptionalString(user, "token", at + ".token"));
    STAR_ASSIGN_OR_RETURN(std::string token_file, OptionalString(user, "tokenFile", at + ".tokenFile"));
    if (!options->token.empty() || token_file.empty()) return Status::Ok();
    auto token = ReadFile(Resolve(token_file));
    if (!token.ok()) return Bad(at + ".tokenFile", token.status().message());
    options->token = TrimNewlines(*token);
    if (options->token.empty()) return Bad(at + ".tokenFile", Resolve(token_file).string() + " is empty");
    options->token_file = Resolve(token_file).string();
    return Status::Ok();
  }

  // client-certificate(-data) and client-key(-data): both or neither.
  Status ReadClientCertificate(const YAML::Node& user, const std::string& at, ClientOptions* options) const {
    STAR_ASSIGN_OR_RETURN(std::string cert, OptionalString(user, "client-certificate", at + ".client-certificate"));
    STAR_ASSIGN_OR_RETURN(std::string key, OptionalString(user, "client-key", at + ".client-key"));
    if (!cert.empty()) options->client_cert_file = Resolve(cert).string();
    if (!key.empty()) options->client_key_file = Resolve(key).string();
    STAR_ASSIGN_OR_RETURN(options->client_cert_data, Base64Field(user, "client-certificate-data", at));
    STAR_ASSIGN_OR_RETURN(options->client_key_data, Base64Field(user, "client-key-data", at));
    const bool has_cert = !cert.empty() || !options->client_cert_data.empty();
    const bool has_key = !key.empty() || !options->client_key_data.empty();
    if (has_cert && !has_key) return Bad(at + ".client-key", "missing (client-certificate needs it)");
    if (has_key && !has_cert) return Bad(at + ".client-certificate", "missing (client-key needs it)");
    for (const auto& [file, field] : {std::pair{options->client_cert_file, "client-certificate"},
                                      {options->client_key_file, "client-key"}}) {
      std::error_code ec;
      if (!file.empty() && !fs::exists(file, ec)) return Bad(at + "." + field, file + ": no such file");
    }
    return Status::Ok();
  }

  // The decoded contents of a base64 field ("" when absent).
  StatusOr<std::string> Base64Field(const YAML::Node& map, const std::string& key, const std::string& at) const {
    STAR_ASSIGN_OR_RETURN(std::string text, OptionalString(map, key, at + "." + key));
    if (text.empty()) return text;
    // yaml-cpp 0.7's DecodeBase64 reads out of its table on bytes >= 0x80: check first.
    if (text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/= \t\r\n") !=
        std::string::npos) {
      return Bad(at + "." + key, "not base64");
    }
    const std::vector<unsigned char> bytes = YAML::DecodeBase64(text);
    if (bytes.empty()) return Bad(at + "." + key, "not base64");
    return std::string(bytes.begin(), bytes.end());
  }

  // users[i].user.exec (client.authentication.k8s.io ExecConfig).
  StatusOr<ExecConfig> ReadExec(const YAML::Node& exec, const std::string& at) const {
    if (!exec.IsMap()) return Bad(at, "not a map");
    ExecConfig c;
    STAR_ASSIGN_OR_RETURN(c.api_version, RequiredString(exec, "apiVersion", at + ".apiVersion"));
    if (c.api_version != "client.authentication.k8s.io/v1" && c.api_version != "client.authentication.k8s.io/v1beta1") {
      return Bad(at + ".apiVersion", "\"" + c.api_version +
                                         "\" (want client.authentication.k8s.io/v1 or v1beta1)");
    }
    STAR_ASSIGN_OR_RETURN(c.command, RequiredString(exec, "command", at + ".command"));
    if (c.command.find('/') != std::string::npos) c.command = Resolve(c.command).string();
    STAR_ASSIGN_OR_RETURN(c.args, StringList(exec, "args", at + ".args"));
    STAR_ASSIGN_OR_RETURN(c.env, EnvList(exec, at + ".env"));
    STAR_ASSIGN_OR_RETURN(c.install_hint, OptionalString(exec, "installHint", at + ".installHint"));
    STAR_ASSIGN_OR_RETURN(c.provide_cluster_info, OptionalBool(exec, "provideClusterInfo", at + ".provideClusterInfo"));
    STAR_ASSIGN_OR_RETURN(std::string mode, OptionalString(exec, "interactiveMode", at + ".interactiveMode"));
    if (mode == "Always") return Bad(at + ".interactiveMode", "Always needs a terminal; this client has none");
    if (!mode.empty() && mode != "Never" && mode != "IfAvailable") {
      return Bad(at + ".interactiveMode", "\"" + mode + "\" (want Never, IfAvailable or Always)");
    }
    return c;
  }

  StatusOr<std::vector<std::string>> StringList(const YAML::Node& map, const std::string& key,
                                                const std::string& at) const {
    std::vector<std::string> out;
    if (!map[key] || map[key].IsNull()) return out;
    if (!map[key].IsSequence()) return Bad(at, "not a list");
    for (size_t i = 0; i < map[key].size(); ++i) {
      if (!map[key][i].IsScalar()) return Bad(at + "[" + std::to_string(i) + "]", "not a string");
      out.push_back(map[key][i].Scalar());
    }
    return out;
  }

  StatusOr<std::vector<std::pair<std::string, std::string>>> EnvList(const YAML::Node& exec,
                                                                     const std::string& at) const {
    std::vector<std::pair<std::string, std::string>> out;
    if (!exec["env"] || exec["env"].IsNull()) return out;
    if (!exec["env"].IsSequence()) return Bad(at, "not a list");
    for (size_t i = 0; i < exec["env"].size(); ++i) {
      const std::string field = at + "[" + std::to_string(i) + "]";
      STAR_ASSIGN_OR_RETURN(std::string name, RequiredString(exec["env"][i], "name", field + ".name"));
      STAR_ASSIGN_OR_RETURN(std::string value, OptionalString(exec["env"][i], "value", field + ".value"));
      out.emplace_back(name, value);
    }
    return out;
  }

  StatusOr<bool> OptionalBool(const YAML::Node& map, const std::string& key, const std::string& field) const {
    if (!map[key] || map[key].IsNull()) return false;
    try {
      return map[key].as<bool>();
    } catch (const YAML::Exception&) {
      return Bad(field, "not a boolean");
    }
  }

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
  STAR_RETURN_IF_ERROR(yaml::CheckSyntax(*text, "kubeconfig " + file));  // see star/yaml/syntax.h
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
  options.token_file = (dir / "token").string();  // the kubelet rotates it
  if (options.token.empty()) return Status::FailedPrecondition("in-cluster: " + (dir / "token").string() + " is empty");
  std::error_code ec;
  if (fs::exists(dir / "ca.crt", ec)) options.ca_file = (dir / "ca.crt").string();
  if (auto ns = ReadFile(dir / "namespace"); ns.ok() && !TrimNewlines(*ns).empty()) {
    options.default_namespace = TrimNewlines(*ns);
  }
  return options;
}

}  // namespace star::kube
