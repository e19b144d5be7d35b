// EventRecorder: Kubernetes Events about TrainingJobs (kubectl describe tj shows them).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "star/kube/client.h"

namespace star::op {

struct EventSpec {
  std::string type;  // Normal | Warning
  std::string reason;  // CamelCase
  std::string message;
};

class EventRecorder {
 public:
  // `client` must outlive the recorder.
  explicit EventRecorder(kube::Client* client) : client_(client) {}

  // Creates a v1 Event involving `job` (source star-operator). A failure is logged, not
  // returned: an Event is never worth failing a reconcile for. Thread-safe.
  void Emit(const nlohmann::json& job, const EventSpec& e);

 private:
  kube::Client* client_;
  std::atomic<uint64_t> seq_{0};  // makes names unique within a clock tick
};

}  // namespace star::op
