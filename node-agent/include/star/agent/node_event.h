// Events the agent records about its node (core/v1 Events, shown by `kubectl describe
// node` and `kubectl get events -n default`): in namespace "default", where the kubelet
// records node events, with involvedObject {kind: Node, name: NODE, uid: NODE} (the
// kubelet's convention for node events) and source.component star-agent.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "star/core/status.h"
#include "star/kube/client.h"

namespace star::agent {

inline constexpr char kNodeEventNamespace[] = "default";

struct NodeEvent {
  std::string type = "Warning";  // Normal | Warning
  std::string reason;            // CamelCase, e.g. CorruptJournal
  std::string message;
};

// The Event object (exposed for tests); its name is "<node>.star-agent.<hex of now>".
nlohmann::json NodeEventObject(const std::string& node, const NodeEvent& e,
                               std::chrono::system_clock::time_point now);

// Creates the Event; the client's error otherwise (the caller may try again later).
[[nodiscard]] Status RecordNodeEvent(kube::Client& client, const std::string& node,
                                     const NodeEvent& e);

}  // namespace star::agent
