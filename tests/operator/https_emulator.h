// The API emulator as a cluster's API server is met: HTTPS with a throwaway CA, client
// certificates required, and a kubeconfig whose user authenticates with a client
// certificate (files) and trusts the CA (certificate-authority-data). star-operator,
// star-agent and kubectl all use that one kubeconfig.
#pragma once

#include <string>

#include "server.h"
#include "star/test_support/tls.h"

namespace star::op::e2e {

// The emulator's options for HTTPS under `ca`, its files written into `dir`.
inline apiserver::ApiServerOptions HttpsEmulatorOptions(const test_support::TestCa& ca, const std::string& dir) {
  using test_support::CertifiedKey;
  using test_support::WriteTextFile;
  const CertifiedKey serving = ca.IssueServer({"localhost"}, {"127.0.0.1"});
  const CertifiedKey admin = ca.IssueClient("star-operator", {"system:masters"});
  apiserver::ApiServerOptions o;
  o.tls.cert_file = WriteTextFile(dir + "/apiserver.crt", serving.cert);
  o.tls.key_file = WriteTextFile(dir + "/apiserver.key", serving.key);
  o.tls.client_ca_file = WriteTextFile(dir + "/ca.crt", ca.cert_pem());
  o.tls.ca_file = dir + "/ca.crt";
  o.kubeconfig_user.client_cert_file = WriteTextFile(dir + "/admin.crt", admin.cert);
  o.kubeconfig_user.client_key_file = WriteTextFile(dir + "/admin.key", admin.key);
  return o;
}

}  // namespace star::op::e2e
