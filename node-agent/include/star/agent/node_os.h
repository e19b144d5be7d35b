// NodeOs: every touch of the operating system the node agent makes, behind one interface
// (the leveldb Env pattern): a real implementation (cgroups through libcgroup, tc through
// libnl-route), an in-memory one, and a fault-injecting wrapper for tests.
//
// Cgroups are named by their path relative to the CPU controller's hierarchy root (v1:
// the cpu controller mount, v2: the unified root), e.g. "kubepods/burstable/pod1234";
// interfaces by name (the pod's host-side veth, which PodInterface finds). Implementations refuse paths that are
// absolute, contain "..", or leave the configured root (InvalidArgument naming the path).
// All methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::agent {

enum class CgroupVersion { kV1, kV2 };

// CPU bandwidth and share of one cgroup.
struct CpuLimits {
  int64_t quota_us = -1;      // CFS quota per period; -1 = unlimited
  int64_t period_us = 100000; // CFS period, 1000..1000000
  int64_t weight = 100;       // cgroup v2 cpu.weight scale 1..10000 (v1: shares = weight*1024/100)
  friend bool operator==(const CpuLimits&, const CpuLimits&) = default;
};

// cpu.stat (v2 names; v1 values converted): cumulative since the cgroup was created.
struct CpuStats {
  int64_t usage_usec = 0;
  int64_t nr_periods = 0;
  int64_t nr_throttled = 0;
  int64_t throttled_usec = 0;
};

// Bandwidth limits of one interface. Egress = what leaves the interface (traffic *to*
// the pod when it is the pod's host-side veth), ingress = what arrives on it. The kernel
// keeps rates in whole bytes per second: a rate reads back rounded down to a multiple of
// 8 bit/s, so desired rates should be multiples of 8 (compare after the same rounding).
struct NetLimits {
  int64_t egress_bits_per_second = 0;   // 0 = unlimited (no shaping)
  int64_t ingress_bits_per_second = 0;  // 0 = unlimited
  int priority = 0;                     // 0 (highest) .. 7
  friend bool operator==(const NetLimits&, const NetLimits&) = default;
};

struct NetStats {
  int64_t tx_bytes = 0;
  int64_t rx_bytes = 0;
};

class NodeOs {
 public:
  virtual ~NodeOs() = default;

  virtual CgroupVersion cgroup_version() const = 0;

  [[nodiscard]] virtual StatusOr<bool> CgroupExists(const std::string& cgroup) = 0;
  [[nodiscard]] virtual StatusOr<CpuLimits> ReadCpu(const std::string& cgroup) = 0;
  [[nodiscard]] virtual Status WriteCpu(const std::string& cgroup, const CpuLimits& limits) = 0;
  [[nodiscard]] virtual StatusOr<CpuStats> ReadCpuStats(const std::string& cgroup) = 0;
  // Names (not paths) of the cgroups directly below `cgroup`, sorted. NotFound when
  // `cgroup` does not exist.
  [[nodiscard]] virtual StatusOr<std::vector<std::string>> ListCgroups(
      const std::string& cgroup) = 0;

  [[nodiscard]] virtual StatusOr<bool> InterfaceExists(const std::string& ifname) = 0;
  [[nodiscard]] virtual StatusOr<NetLimits> ReadNet(const std::string& ifname) = 0;
  // Installs (or replaces, or with zeros removes) the interface's shaping; idempotent.
  [[nodiscard]] virtual Status WriteNet(const std::string& ifname, const NetLimits& limits) = 0;
  [[nodiscard]] virtual StatusOr<NetStats> ReadNetStats(const std::string& ifname) = 0;

  // The host-side interface of the pod whose cgroup is `cgroup`: the network namespace of
  // a process in that cgroup (or below it), the veth there whose peer lives in this
  // NodeOs's network namespace, and that peer's name. Never answers an interface that is
  // not the peer of the pod's own veth. Errors:
  //   NotFound            no process in the cgroup (not started, or gone), no veth in
  //                       the pod's namespace (not set up yet), or its peer is not here
  //                       (the interface vanished);
  //   FailedPrecondition  the processes share this NodeOs's network namespace (a host-
  //                       network pod: the node's own interfaces are never the pod's), or
  //                       the pod's namespace has several veths and none is eth0;
  //   InvalidArgument     a bad cgroup path (as for the other methods).
  [[nodiscard]] virtual StatusOr<std::string> PodInterface(const std::string& cgroup) = 0;
};

}  // namespace star::agent
