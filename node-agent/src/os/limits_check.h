// Argument checks shared by every NodeOs implementation, so that the in-memory and the
// real one accept and refuse exactly the same inputs.
#pragma once

#include <string>

#include "star/agent/node_os.h"

namespace star::agent::internal {

// OK for a relative path without "." / ".." components or empty components; otherwise
// InvalidArgument naming the path.
Status CheckCgroupPath(const std::string& cgroup);
// OK for a Linux interface name (1..15 chars, no '/', whitespace or ':').
Status CheckIfname(const std::string& ifname);
// quota -1 or >= 1000; period 1000..1000000; weight 1..10000.
Status CheckCpuLimits(const CpuLimits& limits);
// rates >= 0, priority 0..7.
Status CheckNetLimits(const NetLimits& limits);

}  // namespace star::agent::internal
