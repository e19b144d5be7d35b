// MemoryHost: an in-memory Host for tests (the leveldb memenv pattern). It keeps the
// cgroups, interfaces, namespaces, addresses, limits and delays it was asked for and
// records every mutating call, so a test can assert what `star local` did to the host
// without root. CPU limits and shaping are validated by the node agent's MemoryNodeOs,
// exactly as the real host's NodeOs validates them. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "local/host.h"
#include "star/agent/memory_node_os.h"

namespace star::local {

class MemoryHost final : public Host {
 public:
  // `version` is what cgroup_version() reports; `netem`: whether SetDelay works (without
  // it, a delay is Unavailable as on a kernel without CONFIG_NET_SCH_NETEM).
  explicit MemoryHost(agent::CgroupVersion version = agent::CgroupVersion::kV1,
                      bool netem = true);

  agent::CgroupVersion cgroup_version() const override { return version_; }
  Status CreateCgroup(const std::string& cgroup, bool existing_ok) override;
  bool CgroupExists(const std::string& cgroup) override;
  std::vector<std::string> ChildCgroups(const std::string& cgroup) override;
  std::vector<pid_t> CgroupProcesses(const std::string& cgroup) override;
  Status MoveProcess(const std::string& cgroup, pid_t pid) override;
  Status RemoveCgroup(const std::string& cgroup) override;
  Status WriteCpu(const std::string& cgroup, const agent::CpuLimits& limits) override;
  void Kill(pid_t pid) override;

  std::vector<std::string> Links() override;
  bool LinkExists(const std::string& ifname) override;
  Status DeleteLink(const std::string& ifname) override;
  std::vector<std::string> Namespaces() override;
  Status CreateNamespace(const std::string& ns) override;
  Status DeleteNamespace(const std::string& ns) override;
  std::string NamespacePath(const std::string& ns) const override { return "/memory/netns/" + ns; }
  Status CreateBridge(const std::string& bridge) override;
  Status CreateVeth(const std::string& host_ifname, const std::string& bridge,
                    const std::string& ns, const std::string& peer) override;
  StatusOr<std::vector<InterfaceAddress>> Addresses() override;
  Status AddAddress(const std::string& ns, const std::string& ifname,
                    const std::string& cidr) override;
  Status DeleteAddress(const std::string& ns, const std::string& ifname,
                       const std::string& cidr) override;
  Status BringUp(const std::string& ns, const std::string& ifname,
                 const std::string& gateway) override;
  Status WriteNet(const std::string& ifname, const agent::NetLimits& limits) override;
  Status SetDelay(const std::string& ns, const std::string& ifname, double seconds) override;
  Status SetUplinkShare(const std::string& ns, const std::string& ifname,
                        const UplinkShare& share) override;

  // ---- for tests ----
  // Every existing cgroup, sorted (a parent before its children).
  std::vector<std::string> cgroups() const;
  // The limits last written to `cgroup`; nullopt when it is absent or never written.
  std::optional<agent::CpuLimits> cpu(const std::string& cgroup) const;
  // The shaping of `ifname` (zeros when none or absent).
  agent::NetLimits net(const std::string& ifname) const;
  // The uplink share on `ifname` in `ns` (zeros when none).
  UplinkShare uplink(const std::string& ns, const std::string& ifname) const;
  // The netem delay on `ifname` in `ns`, 0 when none.
  double delay(const std::string& ns, const std::string& ifname) const;
  // Every mutating call so far, in order, e.g. "WriteCpu star-local/j-1/slot0 4000/20000/100".
  std::vector<std::string> calls() const;
  // The calls that start with `prefix`.
  std::vector<std::string> calls(const std::string& prefix) const;
  // Whether nothing but the cgroups in `keep` (and no interface, namespace, address or
  // delay) is left.
  bool empty_except(const std::set<std::string>& keep) const;
  // The next mutating call whose record starts with `call_prefix` fails with `status`
  // (once) and changes nothing.
  void FailNext(const std::string& call_prefix, Status status);
  // Puts a process of a test's choosing into an existing cgroup (not recorded).
  void AddProcess(const std::string& cgroup, pid_t pid);
  // An address some other interface holds (not recorded), for subnet choice tests.
  void AddForeignAddress(const std::string& ifname, uint32_t address);

 private:
  struct Link {
    std::string kind;  // "bridge", "veth", "ifb", "other"
    std::string peer_ns;
  };
  struct Address {
    std::string ns, ifname, cidr;
    friend bool operator==(const Address&, const Address&) = default;
  };

  // Records `call`; the injected failure for it, if any (then nothing may change).
  Status Record(const std::string& call);

  const agent::CgroupVersion version_;
  const bool netem_;
  mutable agent::MemoryNodeOs os_;  // limits: validated and stored as the agent's in-memory OS does
  mutable std::mutex mu_;
  std::map<std::string, std::set<pid_t>> cgroups_;
  std::map<std::string, agent::CpuLimits> cpu_;
  std::map<std::string, Link> links_;
  std::map<std::string, std::set<std::string>> namespaces_;  // ns -> its interfaces
  std::vector<Address> addresses_;
  std::vector<InterfaceAddress> foreign_;
  std::map<std::pair<std::string, std::string>, double> delays_;
  std::map<std::pair<std::string, std::string>, UplinkShare> uplinks_;
  std::vector<std::string> calls_;
  std::vector<std::pair<std::string, Status>> faults_;
};

}  // namespace star::local
