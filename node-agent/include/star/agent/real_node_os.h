// RealNodeOs: the NodeOs of a real Linux node. CPU limits go through libcgroup (cgroup v1:
// cpu.cfs_quota_us, cpu.cfs_period_us, cpu.shares; usage from cpuacct.usage when the same
// cgroup exists in the cpuacct hierarchy) or, for cgroup v2, through direct file I/O on
// cpu.max / cpu.weight / cpu.stat under the unified root. Bandwidth goes through
// libnl-route: egress is an HTB root qdisc 1: whose default class 1:1 has rate = ceil =
// the limit and the given priority; limits of zero delete the root qdisc. Rates are
// installed in whole bytes per second (ReadNet returns them rounded down to a multiple of
// 8 bit/s; MemoryNodeOs does the same). Only a root qdisc "htb 1:" is considered ours:
// ReadNet reports no limit for any other root qdisc and a removal leaves it alone.
//
// Ingress: an IFB device per interface (named by IfbName below) carrying htb 1:/1:1 at
// the ingress rate, fed by an ingress qdisc ffff: on the interface with a u32 match-all
// filter whose mirred action redirects to the IFB; ingress 0 removes both. A failed WriteNet puts the previous limits back. Needs the
// ifb, act_mirred and cls_u32 kernel modules.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "star/agent/node_os.h"

namespace star::agent {

struct RealNodeOsOptions {
  // Cgroup version. Default (nullopt): v2 if /sys/fs/cgroup/cgroup.controllers lists
  // "cpu", else v1 (the cpu controller's mount found by libcgroup in /proc/mounts).
  std::optional<CgroupVersion> version;
  // v2 only: the unified hierarchy's root directory. Default "": /sys/fs/cgroup.
  // (v1 always uses libcgroup's cpu controller mount; setting this with v1 is an error.)
  std::string cgroup_v2_root;
  // Only cgroups equal to or below this path (relative to the hierarchy root) may be
  // read or written; anything else is InvalidArgument. Default "kubepods".
  std::string allowed_prefix = "kubepods";
};

// Detects the cgroup setup and opens a netlink route socket. Errors: FailedPrecondition
// when no usable CPU hierarchy is found, InvalidArgument for bad options, Unavailable when
// libcgroup or netlink cannot be initialised. The returned object is thread-safe.
[[nodiscard]] StatusOr<std::unique_ptr<NodeOs>> NewRealNodeOs(const RealNodeOsOptions& options);

// The IFB device that carries the ingress shaping of interface `ifname`: "stbi" + the 8
// hex digits of Fnv1a32(ifname) (core/common/hash.h), 12 characters, within IFNAMSIZ.
// Deterministic, so a restarted agent (or whoever removes the interface) finds it again;
// it lives in the interface's network namespace.
std::string IfbName(const std::string& ifname);

}  // namespace star::agent
