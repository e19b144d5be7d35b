// Host: everything `star local` does to this machine, behind one interface (the leveldb
// Env pattern, as the node agent's NodeOs): cgroups (v1 or v2), network namespaces, veth
// pairs, the bridge and its addresses, bandwidth shaping and netem delay. NewRealHost
// (real_host.h) touches the machine, sharing the node agent's NodeOs for CPU limits and
// shaping; MemoryHost (memory_host.h) records what was asked, so that the sandbox and the
// runtime's policies can be tested without root.
//
// Cgroups are named by their path relative to the CPU controller's hierarchy root, e.g.
// "star-local/job-1234/slot0/main" (v1: the same path in the cpu and the cpuacct
// hierarchy). Paths must be relative, without empty, "." or ".." components
// (InvalidArgument naming the path). Interfaces and namespaces are named as `ip` names
// them; "" as a namespace is the root one. All methods are thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "star/agent/node_os.h"
#include "star/core/status.h"

namespace star::local {

// An IPv4 address on an interface of the root network namespace.
struct InterfaceAddress {
  std::string ifname;
  uint32_t address = 0;  // host byte order
};

// An uplink of link_bps shared by the slot's own traffic and a co-located sender's (the
// traffic to neighbor_address): HTB with the link's rate, the sender's class capped at
// neighbor_bps and the slot's class guaranteed the rest, borrowing up to the whole link.
struct UplinkShare {
  int64_t link_bps = 0;      // 0 = unshaped
  int64_t neighbor_bps = 0;  // 0 (no co-located sender: the link alone) or in [8000, link_bps)
  std::string neighbor_address;  // IPv4, the co-located sender's destination
  friend bool operator==(const UplinkShare&, const UplinkShare&) = default;
};

class Host {
 public:
  virtual ~Host() = default;

  // ---- cgroups ----
  virtual agent::CgroupVersion cgroup_version() const = 0;
  // Creates `cgroup`, whose parent must exist; on v2 the parent's cpu controller is
  // enabled for its children. AlreadyExists when it exists (OK with existing_ok);
  // FailedPrecondition "... (needs root)" without permission.
  [[nodiscard]] virtual Status CreateCgroup(const std::string& cgroup, bool existing_ok) = 0;
  virtual bool CgroupExists(const std::string& cgroup) = 0;
  // The names of the cgroup's children, sorted; empty when it does not exist.
  virtual std::vector<std::string> ChildCgroups(const std::string& cgroup) = 0;
  // The processes directly in `cgroup` (not in its children); empty when it is absent.
  virtual std::vector<pid_t> CgroupProcesses(const std::string& cgroup) = 0;
  // Moves process `pid` into `cgroup` (every hierarchy). NotFound when it is absent.
  [[nodiscard]] virtual Status MoveProcess(const std::string& cgroup, pid_t pid) = 0;
  // Removes `cgroup`, which must be empty and have no children; OK when it is absent.
  [[nodiscard]] virtual Status RemoveCgroup(const std::string& cgroup) = 0;
  // CPU quota, period and weight of `cgroup` (agent::NodeOs::WriteCpu).
  [[nodiscard]] virtual Status WriteCpu(const std::string& cgroup,
                                        const agent::CpuLimits& limits) = 0;
  // Sends SIGKILL to process `pid` (which leaves its cgroups once it is gone).
  virtual void Kill(pid_t pid) = 0;

  // ---- network ----
  // The interfaces of the root namespace.
  virtual std::vector<std::string> Links() = 0;
  virtual bool LinkExists(const std::string& ifname) = 0;
  // Deletes interface `ifname` of the root namespace (a veth takes its peer with it).
  [[nodiscard]] virtual Status DeleteLink(const std::string& ifname) = 0;
  // The named network namespaces.
  virtual std::vector<std::string> Namespaces() = 0;
  [[nodiscard]] virtual Status CreateNamespace(const std::string& ns) = 0;
  [[nodiscard]] virtual Status DeleteNamespace(const std::string& ns) = 0;
  // The file a process opens to enter namespace `ns` (setns).
  virtual std::string NamespacePath(const std::string& ns) const = 0;
  // Creates bridge `bridge` in the root namespace and sets it up.
  [[nodiscard]] virtual Status CreateBridge(const std::string& bridge) = 0;
  // Creates a veth pair: `host_ifname` in the root namespace, a port of `bridge`, up;
  // its peer `peer` in namespace `ns`.
  [[nodiscard]] virtual Status CreateVeth(const std::string& host_ifname,
                                          const std::string& bridge, const std::string& ns,
                                          const std::string& peer) = 0;
  // Every IPv4 address on the root namespace's interfaces.
  [[nodiscard]] virtual StatusOr<std::vector<InterfaceAddress>> Addresses() = 0;
  // Adds / deletes address `cidr` ("10.213.7.1/24") on `ifname` in namespace `ns`.
  [[nodiscard]] virtual Status AddAddress(const std::string& ns, const std::string& ifname,
                                          const std::string& cidr) = 0;
  [[nodiscard]] virtual Status DeleteAddress(const std::string& ns, const std::string& ifname,
                                             const std::string& cidr) = 0;
  // In namespace `ns`: sets lo and `ifname` up and the default route via `gateway`.
  [[nodiscard]] virtual Status BringUp(const std::string& ns, const std::string& ifname,
                                       const std::string& gateway) = 0;
  // Egress/ingress shaping of root-namespace interface `ifname` (agent::NodeOs::WriteNet;
  // the ingress IFB device is agent::IfbName(ifname)).
  [[nodiscard]] virtual Status WriteNet(const std::string& ifname,
                                        const agent::NetLimits& limits) = 0;
  // Adds or replaces a netem delay of `seconds` (> 0) on the egress of `ifname` in
  // namespace `ns`; 0 removes it (OK when none is there). Unavailable, saying so, when
  // the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM).
  [[nodiscard]] virtual Status SetDelay(const std::string& ns, const std::string& ifname,
                                        double seconds) = 0;
  // Shapes the egress of `ifname` in namespace `ns` as an uplink shared with a co-located
  // sender (UplinkShare); share.link_bps 0 removes it (OK when none is there).
  [[nodiscard]] virtual Status SetUplinkShare(const std::string& ns, const std::string& ifname,
                                              const UplinkShare& share) = 0;
};

// OK for a cgroup path as described above; InvalidArgument naming it otherwise.
[[nodiscard]] Status CheckCgroupPath(const std::string& cgroup);
// "a/b" for "a/b/c"; "" for a top-level cgroup.
std::string ParentCgroup(const std::string& cgroup);

}  // namespace star::local
