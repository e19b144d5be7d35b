// The Host of this machine (host.h). Cgroups by direct file I/O on the hierarchy chosen
// below; CPU limits and bandwidth shaping through the node agent's RealNodeOs (the same
// code the agent runs: libcgroup or cgroup v2 files, libnl-route HTB + IFB); namespaces,
// veths, the bridge, addresses and netem delay through iproute2's `ip` and `tc`
// (netns_util.h RunChecked: a failure names the command and quotes its stderr).
//
// Cgroup version: v2 when the machine's cgroup2 hierarchy is the one with the cpu
// controller (its cgroup.controllers lists "cpu"), else v1 (the cpu hierarchy, and the
// cpuacct one when it is mounted apart). A machine with v1 controllers and a cgroup2
// mount without cpu (the hybrid layout) uses v1.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "local/host.h"

namespace star::local {

struct CgroupLayout {
  agent::CgroupVersion version = agent::CgroupVersion::kV1;
  // v1: the cpu hierarchy's mount point, then cpuacct's when it is a different one;
  // v2: the cgroup2 mount point.
  std::vector<std::string> mounts;
};

// The layout described above, from the text of /proc/mounts and a reader of a file's
// contents ("" when unreadable). FailedPrecondition when neither a cgroup2 hierarchy
// with cpu nor a v1 cpu hierarchy is mounted.
[[nodiscard]] StatusOr<CgroupLayout> ChooseCgroupLayout(
    const std::string& proc_mounts, const std::function<std::string(const std::string&)>& read);
// ChooseCgroupLayout on this machine.
[[nodiscard]] StatusOr<CgroupLayout> DetectCgroupLayout();

struct RealHostOptions {
  // Cgroups WriteCpu may change: this one and those below it. Required.
  std::string allowed_prefix;
  // Default (nullopt): DetectCgroupLayout().
  std::optional<CgroupLayout> layout;
};

// Errors: InvalidArgument for a bad allowed_prefix; FailedPrecondition when no usable
// cpu hierarchy is mounted; RealNodeOs's errors when it cannot start.
[[nodiscard]] StatusOr<std::unique_ptr<Host>> NewRealHost(const RealHostOptions& options);

}  // namespace star::local
