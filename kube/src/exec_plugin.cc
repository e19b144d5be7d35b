// The exec credential protocol of client-go: KUBERNETES_EXEC_INFO in, ExecCredential out.
#include "exec_plugin.h"

#include <nlohmann/json.hpp>

#include <map>

#include "star/kube/time.h"
#include "subprocess.h"

extern char** environ;

namespace star::kube {
namespace {

using nlohmann::json;

Status Bad(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("ExecCredential: " + field + ": " + why);
}

// The string at `key` of `object` ("" when absent); an error when it is not a string.
StatusOr<std::string> StringField(const json& object, const std::string& key, const std::string& field) {
  if (!object.contains(key) || object[key].is_null()) return std::string();
  if (!object[key].is_string()) return Bad(field, "not a string");
  return object[key].get<std::string>();
}

// This process's environment with `config.env` over it and KUBERNETES_EXEC_INFO.
std::vector<std::string> PluginEnvironment(const ExecConfig& config, const std::string& server,
                                           const std::string& ca_data) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [name, value] : config.env) vars[name] = value;
  json spec = {{"interactive", false}};
  if (config.provide_cluster_info) {
    spec["cluster"] = {{"server", server}};
    if (!ca_data.empty()) spec["cluster"]["certificate-authority-data"] = ca_data;
  }
  vars["KUBERNETES_EXEC_INFO"] =
      json{{"apiVersion", config.api_version}, {"kind", "ExecCredential"}, {"spec", spec}}.dump();
  std::vector<std::string> out;
  for (const auto& [name, value] : vars) out.push_back(name + "=" + value);
  return out;
}

std::string Tail(const std::string& text, size_t n = 512) {
  std::string t = text.size() > n ? text.substr(text.size() - n) : text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  return t;
}

}  // namespace

StatusOr<ExecCredential> ParseExecCredential(const std::string& text, const std::string& api_version) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return Bad("(output)", "not a JSON object");
  STAR_ASSIGN_OR_RETURN(std::string version, StringField(j, "apiVersion", "apiVersion"));
  if (version != api_version) return Bad("apiVersion", "\"" + version + "\", want \"" + api_version + "\"");
  STAR_ASSIGN_OR_RETURN(std::string kind, StringField(j, "kind", "kind"));
  if (kind != "ExecCredential") return Bad("kind", "\"" + kind + "\", want \"ExecCredential\"");
  if (!j.contains("status") || !j["status"].is_object()) return Bad("status", "missing");
  const json& status = j["status"];
  ExecCredential c;
  STAR_ASSIGN_OR_RETURN(c.token, StringField(status, "token", "status.token"));
  STAR_ASSIGN_OR_RETURN(c.client_cert_pem, StringField(status, "clientCertificateData", "status.clientCertificateData"));
  STAR_ASSIGN_OR_RETURN(c.client_key_pem, StringField(status, "clientKeyData", "status.clientKeyData"));
  if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
    return Bad(c.client_cert_pem.empty() ? "status.clientCertificateData" : "status.clientKeyData",
               "missing (a client certificate needs both)");
  }
  if (c.token.empty() && c.client_cert_pem.empty()) {
    return Bad("status", "neither token nor clientCertificateData");
  }
  STAR_ASSIGN_OR_RETURN(std::string expiry, StringField(status, "expirationTimestamp", "status.expirationTimestamp"));
  if (!expiry.empty()) {
    c.expires = ParseRfc3339(expiry);
    if (!c.expires) return Bad("status.expirationTimestamp", "\"" + expiry + "\" is not an RFC 3339 time");
  }
  return c;
}

StatusOr<ExecCredential> RunExecPlugin(const ExecConfig& config, const std::string& server,
                                       const std::string& ca_data) {
  const std::string what = "exec plugin " + config.command;
  std::vector<std::string> argv = {config.command};
  argv.insert(argv.end(), config.args.begin(), config.args.end());
  StatusOr<ProcessOutput> run = RunProcess(argv, PluginEnvironment(config, server, ca_data),
                                           std::chrono::duration_cast<std::chrono::milliseconds>(config.timeout));
  if (!run.ok()) {
    std::string message = what + ": cannot be run: " + run.status().message();
    if (!config.install_hint.empty()) message += " (" + config.install_hint + ")";
    return Status(run.status().code(), message);
  }
  if (run->timed_out) {
    return Status::Unavailable(what + ": no answer within " + std::to_string(config.timeout.count()) + " s");
  }
  if (run->exit_code != 0) {
    return Status::Unavailable(what + ": exited with " + std::to_string(run->exit_code) + ": " + Tail(run->err));
  }
  StatusOr<ExecCredential> credential = ParseExecCredential(run->out, config.api_version);
  if (!credential.ok()) return Status::InvalidArgument(what + ": " + credential.status().message());
  return credential;
}

}  // namespace star::kube
