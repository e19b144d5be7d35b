// How a Client reaches and authenticates to the API server: ClientOptions, from a
// kubeconfig file or from the pod's service account.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "star/core/status.h"

namespace star::kube {

// A kubeconfig user's `exec` credential plugin (client.authentication.k8s.io): a command
// that prints an ExecCredential whose status carries a token or a client certificate.
struct ExecConfig {
  std::string api_version = "client.authentication.k8s.io/v1";  // v1 or v1beta1
  std::string command;  // a PATH name, or a path (relative ones resolved against the kubeconfig's directory)
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to this process's environment
  std::string install_hint;   // shown when the command cannot be run
  bool provide_cluster_info = false;  // KUBERNETES_EXEC_INFO's spec.cluster
  std::chrono::seconds timeout{60};   // the plugin is killed after this
};

struct ClientOptions {
  std::string server;         // "https://host:port" or "http://host:port"; required
  std::string token;          // bearer token ("" = none)
  std::string ca_file;        // PEM CA bundle for https ("" = system roots)
  bool insecure_skip_tls_verify = false;
  std::string default_namespace = "default";
  std::chrono::milliseconds request_timeout{10000};  // per request (not watches)
  int max_retries = 5;                               // for 429 / 5xx / connection errors
  std::chrono::milliseconds initial_backoff{100};    // doubles per retry, capped at 5 s
  std::string user_agent = "star-operator";
  // PEM CA bundle contents (a kubeconfig's decoded certificate-authority-data); used when
  // ca_file is "". Added after the fields above so existing initializers keep working.
  std::string ca_data;
  // A file holding the bearer token, read again whenever it changes (projected
  // service-account tokens are rotated by the kubelet) and after a 401; wins over `token`.
  std::string token_file;
  // Client certificate authentication (PEM): a file, or its contents (the decoded
  // client-certificate-data / client-key-data); a file wins over contents.
  std::string client_cert_file;
  std::string client_key_file;
  std::string client_cert_data;
  std::string client_key_data;
  // An exec credential plugin; its credential is cached until its expirationTimestamp
  // (or, without one, until the server answers 401) and wins over token and certificate.
  std::optional<ExecConfig> exec;
};

// Kubeconfig files: the current context (or `context`), its cluster (server,
// certificate-authority(-data), insecure-skip-tls-verify) and user (token, tokenFile,
// client-certificate(-data), client-key(-data), exec); namespace from the context.
// InvalidArgument naming the missing or bad field ("kubeconfig /path:
// users[0].user.client-key: missing (client-certificate needs it)"); NotFound when the
// file does not exist. `path` "" = $KUBECONFIG (its first existing entry when it lists
// several, ':'-separated), else ~/.kube/config. Relative files (certificate-authority,
// tokenFile, client-certificate, client-key, an exec command with a '/') are relative to
// the kubeconfig's directory. auth-provider and basic authentication are refused.
StatusOr<ClientOptions> OptionsFromKubeconfig(const std::string& path, const std::string& context = "");
// In-cluster: KUBERNETES_SERVICE_HOST/PORT, the service-account token (as token_file, so
// rotations are followed), CA and namespace under
// /var/run/secrets/kubernetes.io/serviceaccount (`root` overrides that directory for
// tests). FailedPrecondition when not running in a pod.
StatusOr<ClientOptions> InClusterOptions(
    const std::string& root = "/var/run/secrets/kubernetes.io/serviceaccount");

}  // namespace star::kube
