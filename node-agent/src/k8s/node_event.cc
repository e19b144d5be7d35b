#include "star/agent/node_event.h"

#include <cstdio>

#include "star/kube/time.h"

namespace star::agent {

using nlohmann::json;

json NodeEventObject(const std::string& node, const NodeEvent& e,
                     std::chrono::system_clock::time_point now) {
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "%llx",
                static_cast<unsigned long long>(now.time_since_epoch().count()));
  const std::string at = kube::Rfc3339(now);
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", node + ".star-agent." + suffix}, {"namespace", kNodeEventNamespace}}},
          {"involvedObject", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", node}}},
          {"reason", e.reason},
          {"message", e.message},
          {"type", e.type},
          {"count", 1},
          {"firstTimestamp", at},
          {"lastTimestamp", at},
          {"source", {{"component", "star-agent"}, {"host", node}}},
          {"reportingComponent", "star-agent"},
          {"reportingInstance", node}};
}

Status RecordNodeEvent(kube::Client& client, const std::string& node, const NodeEvent& e) {
  auto created = client.Create(kube::Events(), kNodeEventNamespace,
                               NodeEventObject(node, e, std::chrono::system_clock::now()));
  if (!created.ok()) return created.status().WithPrefix("event " + e.reason + " on node " + node);
  return Status::Ok();
}

}  // namespace star::agent
