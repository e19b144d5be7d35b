// MemoryNodeOs: an in-memory NodeOs for tests (the leveldb memenv pattern). Cgroups and
// interfaces exist only once a test adds them; writes are validated exactly like the real
// implementation's and counted, so a test can assert what was (not) written.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "star/agent/node_os.h"

namespace star::agent {

class MemoryNodeOs final : public NodeOs {
 public:
  // `version` only changes what cgroup_version() reports; limits are stored as given.
  explicit MemoryNodeOs(CgroupVersion version = CgroupVersion::kV1);

  CgroupVersion cgroup_version() const override { return version_; }

  // NodeOs. Paths are checked like RealNodeOs's (InvalidArgument for "", absolute or
  // ".."-containing paths); a cgroup or interface not added is NotFound on read/write and
  // false for *Exists. Write* validates limits (InvalidArgument) before changing anything.
  StatusOr<bool> CgroupExists(const std::string& cgroup) override;
  StatusOr<CpuLimits> ReadCpu(const std::string& cgroup) override;
  Status WriteCpu(const std::string& cgroup, const CpuLimits& limits) override;
  StatusOr<CpuStats> ReadCpuStats(const std::string& cgroup) override;
  // Parents of added cgroups exist implicitly ("a/b" added: "a" lists "b").
  StatusOr<std::vector<std::string>> ListCgroups(const std::string& cgroup) override;
  StatusOr<bool> InterfaceExists(const std::string& ifname) override;
  StatusOr<NetLimits> ReadNet(const std::string& ifname) override;
  Status WriteNet(const std::string& ifname, const NetLimits& limits) override;
  StatusOr<NetStats> ReadNetStats(const std::string& ifname) override;
  // What SetPodInterface set for `cgroup`; NotFound ("no process") when nothing was set.
  StatusOr<std::string> PodInterface(const std::string& cgroup) override;

  // Test hooks (thread-safe). Adding an existing cgroup/interface replaces its limits.
  // They do not count as writes.
  void AddCgroup(const std::string& cgroup, const CpuLimits& limits = {});
  void RemoveCgroup(const std::string& cgroup);
  void SetCpuStats(const std::string& cgroup, const CpuStats& stats);  // adds if missing
  void AddInterface(const std::string& ifname, const NetLimits& limits = {});
  void RemoveInterface(const std::string& ifname);
  void SetNetStats(const std::string& ifname, const NetStats& stats);  // adds if missing
  // What PodInterface(cgroup) answers from now on: an interface name or an error (e.g.
  // FailedPrecondition for a host-network pod). The interface itself is not added.
  void SetPodInterface(const std::string& cgroup, StatusOr<std::string> answer);
  // PodInterface calls so far.
  int64_t pod_interface_calls() const;

  // Successful WriteCpu / WriteNet calls so far (a rejected write is not counted).
  int64_t cpu_writes() const;
  int64_t net_writes() const;
  // Successful writes to one cgroup / interface.
  int64_t cpu_writes(const std::string& cgroup) const;
  int64_t net_writes(const std::string& ifname) const;

 private:
  struct Cgroup {
    CpuLimits limits;
    CpuStats stats;
    int64_t writes = 0;
  };
  struct Interface {
    NetLimits limits;
    NetStats stats;
    int64_t writes = 0;
  };

  const CgroupVersion version_;
  mutable std::mutex mu_;
  std::map<std::string, Cgroup> cgroups_;
  std::map<std::string, Interface> interfaces_;
  std::map<std::string, StatusOr<std::string>> pod_interfaces_;
  int64_t pod_interface_calls_ = 0;
  int64_t cpu_writes_ = 0;
  int64_t net_writes_ = 0;
};

}  // namespace star::agent
