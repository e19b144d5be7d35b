// Restoring every node before the agent goes away (the chart's pre-delete hook runs
// `star-agent --release-daemonset NAME`): the agent DaemonSet's pods are replaced, all at
// once, by pods in release mode, which put every journalled original back (CPU quotas, and
// the interfaces' shaping: the agent's qdiscs and IFB devices removed) and then hold,
// touching nothing, until they are stopped. Release mode is switched on through the pod
// template's annotation kAgentModeAnnotation, which the DaemonSet hands to the agent as
// $STAR_AGENT_MODE (downward API).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "star/core/status.h"
#include "star/kube/client.h"

namespace star::agent {

inline constexpr char kAgentModeAnnotation[] = "star.dev/agent-mode";

kube::ResourceRef DaemonSets();  // apps/v1 daemonsets

// The merge patch that switches the DaemonSet's pods to release mode, all at once.
nlohmann::json ReleasePatch();

// True once the DaemonSet `ds` has rolled out its newest template to every node it runs
// on and each of those pods is ready (a pod in release mode is ready once it restored
// everything).
bool RolledOut(const nlohmann::json& ds);

struct ReleaseOptions {
  // How long to wait for every pod to have restored its node. Default 240 s.
  std::chrono::milliseconds timeout{240'000};
  // Between two looks at the DaemonSet's status. Default 1 s.
  std::chrono::milliseconds poll{1000};
  // How to wait between looks. Default (empty): std::this_thread::sleep_for.
  std::function<void(std::chrono::milliseconds)> sleep;
};

// Patches DaemonSet `ns`/`name` into release mode and waits until it rolled out.
// OK also when the DaemonSet does not exist (nothing to restore); DeadlineExceeded naming
// how many nodes are not restored yet when `timeout` passes; the client's errors.
[[nodiscard]] Status ReleaseDaemonSet(kube::Client& client, const std::string& ns,
                                      const std::string& name, const ReleaseOptions& options = {});

}  // namespace star::agent
