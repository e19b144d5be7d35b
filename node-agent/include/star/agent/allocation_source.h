// Sources of the desired state. FileSource: a NodeAllocation object in a JSON file (the
// form `kubectl get nodeallocation NAME -o json` prints), re-read when it changes. The
// Kubernetes source (watching the node's NodeAllocation object) is k8s_source.h.
//
// Explicit pod interfaces, overriding the agent's own discovery (reconciler.h), come from
// the object's annotations, one per pod:
//   "metadata": {"annotations": {"ifname.star.dev/<pod uid>": "<host-side veth>"}}
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "star/agent/pod_cgroup.h"
#include "star/core/api/node_allocation.h"
#include "star/core/status.h"

namespace star::agent {

inline constexpr std::string_view kInterfaceAnnotationPrefix = "ifname.star.dev/";

struct DesiredState {
  api::NodeAllocation allocation;
  InterfaceMap interfaces;
  friend bool operator==(const DesiredState&, const DesiredState&) = default;
};

// Decodes a NodeAllocation object (api::NodeAllocationFromJson) plus the interface
// annotations, and checks it is for node `node`. InvalidArgument naming the field on any
// error (bad JSON or YAML, schema, hostile uid or interface name, another node's
// object). The text may be JSON or YAML (`kubectl get nodeallocation NODE -o yaml`).
[[nodiscard]] StatusOr<DesiredState> DesiredStateFromJson(const nlohmann::json& j,
                                                          const std::string& node);
[[nodiscard]] StatusOr<DesiredState> DesiredStateFromText(const std::string& text,
                                                          const std::string& node);

// Not thread-safe: one owner polls it.
class FileSource {
 public:
  // Files larger than this are refused (1 MiB per node is thousands of pods).
  static constexpr int64_t kMaxBytes = 16 << 20;

  FileSource(std::string path, std::string node);

  // Checks the file (size, mtime, then a content hash). Returns true when a new valid
  // desired state was loaded, false when nothing changed. Errors (the file is missing,
  // unreadable, too big, or malformed: "<path>: <field>: ..."), repeated on every poll
  // until the file changes, leave the last good desired state in place.
  [[nodiscard]] StatusOr<bool> Poll();

  // The last good desired state; nullopt until a poll succeeded.
  const std::optional<DesiredState>& desired() const { return desired_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string node_;
  std::optional<DesiredState> desired_;
  // What the last poll saw, so an unchanged file is neither re-read nor re-reported.
  bool seen_ = false;
  int64_t seen_size_ = -1;
  int64_t seen_mtime_ns_ = -1;
  int64_t seen_ino_ = -1;
  size_t good_hash_ = 0;
  Status seen_status_;
};

}  // namespace star::agent
