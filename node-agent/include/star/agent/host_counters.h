// HostCounters: the node's cumulative CPU time and one interface's byte counters, read from
// procfs and sysfs (the agent runs with the host's network and PID namespaces), and the
// interface's link speed. Two readings a few seconds apart give what the node used over
// that time (star/agent/headroom.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "star/core/status.h"

namespace star::agent {

// Where procfs and sysfs are: "/proc" and "/sys", or a directory laid out like them (tests).
struct HostPaths {
  std::string proc = "/proc";
  std::string sys = "/sys";
};

struct HostCounters {
  int cpus = 0;                  // the cpuN lines of /proc/stat
  uint64_t cpu_busy_ticks = 0;   // every CPU's time not idle (user .. steal), in clock ticks
  uint64_t cpu_total_ticks = 0;  // busy + idle + iowait
  uint64_t tx_bytes = 0;         // the interface's counters ("" interface: 0)
  uint64_t rx_bytes = 0;
  std::chrono::steady_clock::time_point at;
};

// Reads /proc/stat and, unless `interface` is "", /sys/class/net/<interface>/statistics/
// {tx,rx}_bytes. Errors name the file and what is wrong with it.
[[nodiscard]] StatusOr<HostCounters> ReadHostCounters(const HostPaths& paths,
                                                      const std::string& interface);

// The interface of the IPv4 default route (/proc/net/route), nullopt when there is none.
[[nodiscard]] std::optional<std::string> DefaultRouteInterface(const HostPaths& paths);

// The interface's link speed in bits per second (/sys/class/net/<interface>/speed, in
// Mbit/s), nullopt when it reports none (virtual interfaces: -1, or the read fails).
[[nodiscard]] std::optional<double> LinkSpeedBitsPerSecond(const HostPaths& paths,
                                                           const std::string& interface);

}  // namespace star::agent
