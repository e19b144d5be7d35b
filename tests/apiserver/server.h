// star-test-apiserver as a library: the Kubernetes API emulator (api.h) served over HTTP or
// HTTPS by cpprestsdk, with watch streams as chunked responses and injected latency
// applied without holding a server thread. Tests run it in-process; main.cc wraps it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api.h"
#include "faults.h"
#include "star/core/status.h"

namespace star::apiserver {

// HTTPS, as kube-apiserver's --tls-cert-file, --tls-private-key-file and --client-ca-file.
struct ApiServerTls {
  std::string cert_file;       // serving certificate chain (PEM); with key_file: HTTPS
  std::string key_file;        // its private key (PEM)
  std::string client_ca_file;  // "" = no client certificates asked for; else every
                               // connection must present one this CA signed
  std::string ca_file;         // the CA Kubeconfig() tells clients to trust ("" = none)
  bool enabled() const { return !cert_file.empty(); }
};

// The user Kubeconfig() writes: a bearer token unless a client certificate is given.
struct KubeconfigUser {
  std::string token = "star-emulator-token";
  std::string client_cert_file;
  std::string client_key_file;
};

struct ApiServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;            // 0: pick a free port
  std::string crds_dir;    // every CRD in it is served from the start ("" = none)
  std::vector<FaultRule> faults;  // active from the start
  ApiOptions api;          // latency, watch history, bookmarks, watch timeout
  ApiServerTls tls;        // default plain HTTP
  // Bearer tokens accepted; empty = requests are not authenticated. With client
  // certificates required (tls.client_ca_file) the handshake authenticates instead.
  std::vector<std::string> tokens;
  KubeconfigUser kubeconfig_user;
};

class ApiServer {
 public:
  explicit ApiServer(ApiServerOptions options);
  ~ApiServer();  // Stop()
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Loads the CRDs, binds and serves. InvalidArgument for a bad CRD or an unreadable TLS
  // file (naming it), Unavailable when the address cannot be bound.
  Status Start();
  // Ends every watch stream, answers delayed requests, stops listening. Idempotent.
  void Stop();

  int port() const;
  std::string url() const;  // "http://127.0.0.1:PORT" ("https://..." with TLS)
  Api& api();
  // Replaces the accepted bearer tokens (a token rotation); empty = no authentication.
  void SetTokens(std::vector<std::string> tokens);
  // Requests refused 401 so far.
  int unauthorized() const;

  // A kubeconfig (YAML) for url(): cluster (with tls.ca_file as certificate-authority-data),
  // user (options.kubeconfig_user), context "star-emulator" with namespace default, current.
  std::string Kubeconfig() const;
  // Writes it atomically (temporary file + rename).
  Status WriteKubeconfig(const std::string& path) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace star::apiserver
