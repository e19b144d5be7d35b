// The HTTP endpoint every STAR component on Kubernetes serves for its kubelet probes and
// Prometheus: GET /metrics (the text exposition), /healthz (200 "ok" while alive, or 503
// with the reason it is not), /readyz (200 "ok", or 503 with the reason it is not ready);
// anything else 404.
// cpprestsdk's exceptions stop here.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "star/core/status.h"

namespace star::kube {

struct ProbeHandlers {
  std::function<std::string()> metrics;                  // required
  std::function<std::optional<std::string>()> not_ready;  // required; nullopt = ready
  std::function<void(const std::string&)> log;           // errors while replying; may be empty
  // Why the process is not alive (nullopt = alive); may be empty: alive while it serves.
  std::function<std::optional<std::string>()> not_alive = nullptr;
};

class ProbeServer {
 public:
  // Listens on "HOST:PORT". InvalidArgument when a handler is missing; Unavailable
  // "<flag> HOST:PORT: <reason>" when it cannot listen (`flag` names the option the
  // address came from, for the message).
  static StatusOr<std::unique_ptr<ProbeServer>> Start(const std::string& address,
                                                      ProbeHandlers handlers,
                                                      const std::string& flag);
  ~ProbeServer();  // stops listening
  ProbeServer(const ProbeServer&) = delete;
  ProbeServer& operator=(const ProbeServer&) = delete;

 private:
  struct Impl;
  explicit ProbeServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace star::kube
