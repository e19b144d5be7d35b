// Pod -> cgroup resolution, exactly as the kubelet names pod cgroups, and the checks that
// keep hostile pod uids and interface names from reaching the OS.
//
// Paths are relative to the CPU controller's hierarchy root (see node_os.h):
//   cgroupfs:  Guaranteed  kubepods/pod<uid>
//              Burstable   kubepods/burstable/pod<uid>
//              BestEffort  kubepods/besteffort/pod<uid>
//   systemd:   Guaranteed  kubepods.slice/kubepods-pod<uid_>.slice
//              Burstable   kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice
//              BestEffort  kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid_>.slice
// where <uid_> is the uid with '-' replaced by '_' (systemd reserves '-' as the slice
// hierarchy separator).
//
// Interfaces: a pod's host-side veth is found from its network namespace
// (NodeOs::PodInterface, through a process of the cgroup resolved here). The annotations
// "ifname.star.dev/<pod uid>": "<ifname>" of the NodeAllocation object (allocation_source.h)
// override that with an explicit mapping.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "star/agent/node_os.h"
#include "star/core/status.h"

namespace star::agent {

enum class CgroupDriver { kCgroupfs, kSystemd };
enum class QosClass { kGuaranteed, kBurstable, kBestEffort };

// "cgroupfs" / "systemd"; InvalidArgument otherwise.
[[nodiscard]] StatusOr<CgroupDriver> ParseCgroupDriver(std::string_view s);
std::string_view CgroupDriverName(CgroupDriver d);
std::string_view QosClassName(QosClass q);

// OK iff `uid` is 1..64 characters of [0-9a-fA-F-] (Kubernetes pod uids are RFC 4122
// UUIDs); otherwise InvalidArgument "<field>: ...". Rejects "", "/", "..", whitespace and
// anything else that could leave the pods hierarchy.
[[nodiscard]] Status CheckPodUid(std::string_view uid, std::string_view field = "uid");

// OK iff `ifname` is a valid Linux interface name: 1..15 characters of printable ASCII
// without '/', ':' or spaces, and not "." or "..". InvalidArgument naming `field`.
[[nodiscard]] Status CheckInterfaceName(std::string_view ifname,
                                        std::string_view field = "interface");

// The kubelet's cgroup of pod `uid` (relative path, see the file comment).
// InvalidArgument (from CheckPodUid) for a hostile uid.
[[nodiscard]] StatusOr<std::string> PodCgroup(CgroupDriver driver, QosClass qos,
                                              std::string_view uid);

struct ResolvedPodCgroup {
  QosClass qos = QosClass::kBurstable;
  std::string cgroup;
};

// OK iff `root` is "" or a relative cgroup path ("a/b": no leading '/', no empty, "." or
// ".." components, printable ASCII only). InvalidArgument naming `field` otherwise.
[[nodiscard]] Status CheckCgroupRoot(std::string_view root, std::string_view field = "cgroup root");

// Finds the cgroup of pod `uid` by probing the three QoS classes' paths on `os` (the QoS
// class is not part of a NodeAllocation). NotFound when none exists (the pod has not
// started or is gone); FailedPrecondition when more than one does; InvalidArgument for a
// hostile uid; NodeOs errors are passed through.
// `root` (the kubelet's --cgroup-root, relative, "" = the hierarchy root) prefixes the
// paths: "<root>/kubepods/...".
[[nodiscard]] StatusOr<ResolvedPodCgroup> ResolvePodCgroup(NodeOs& os, CgroupDriver driver,
                                                           std::string_view uid,
                                                           std::string_view root = "");

// pod uid -> host-side interface name.
using InterfaceMap = std::map<std::string, std::string>;

}  // namespace star::agent
