// Exec credential plugins (client.authentication.k8s.io v1 and v1beta1): runs the command
// of a kubeconfig's `exec` user and reads the ExecCredential it prints.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "star/core/status.h"
#include "star/kube/client_options.h"

namespace star::kube {

// What an ExecCredential's status holds.
struct ExecCredential {
  std::string token;
  std::string client_cert_pem;  // clientCertificateData
  std::string client_key_pem;   // clientKeyData
  std::optional<std::chrono::system_clock::time_point> expires;  // expirationTimestamp
};

// Reads an ExecCredential (the plugin's stdout) for `api_version`. InvalidArgument
// naming the field: wrong apiVersion or kind, no status, neither a token nor a
// certificate, a certificate without its key, a bad expirationTimestamp.
StatusOr<ExecCredential> ParseExecCredential(const std::string& text, const std::string& api_version);

// Runs the plugin (stdin /dev/null, KUBERNETES_EXEC_INFO set, `config.env` added; killed
// after config.timeout) and parses what it prints. `server` and `ca_data` fill the
// cluster info when config.provide_cluster_info. Errors name the command: NotFound when
// it cannot be run (with the install hint), Unavailable when it fails or times out (with
// the end of its stderr), InvalidArgument for output that is not an ExecCredential.
StatusOr<ExecCredential> RunExecPlugin(const ExecConfig& config, const std::string& server,
                                       const std::string& ca_data);

}  // namespace star::kube
