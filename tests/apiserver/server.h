// star-test-apiserver as a library: the Kubernetes API emulator (api.h) served over plain
// HTTP by cpprestsdk, with watch streams as chunked responses and injected latency
// applied without holding a server thread. Tests run it in-process; main.cc wraps it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api.h"
#include "faults.h"
#include "star/core/status.h"

namespace star::apiserver {

struct ApiServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;            // 0: pick a free port
  std::string crds_dir;    // every CRD in it is served from the start ("" = none)
  std::vector<FaultRule> faults;  // active from the start
  ApiOptions api;          // latency, watch history, bookmarks, watch timeout
};

class ApiServer {
 public:
  explicit ApiServer(ApiServerOptions options);
  ~ApiServer();  // Stop()
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Loads the CRDs, binds and serves. InvalidArgument for a bad CRD, Unavailable when the
  // address cannot be bound.
  Status Start();
  // Ends every watch stream, answers delayed requests, stops listening. Idempotent.
  void Stop();

  int port() const;
  std::string url() const;  // "http://127.0.0.1:PORT"
  Api& api();

  // A kubeconfig (YAML) for url(): cluster, user with a dummy token, context "star-emulator"
  // with namespace default, current.
  std::string Kubeconfig() const;
  // Writes it atomically (temporary file + rename).
  Status WriteKubeconfig(const std::string& path) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace star::apiserver
