#include "star/agent/memory_node_os.h"

#include <set>

#include "os/limits_check.h"

namespace star::agent {

using internal::CheckCgroupPath;
using internal::CheckCpuLimits;
using internal::CheckIfname;
using internal::CheckNetLimits;

MemoryNodeOs::MemoryNodeOs(CgroupVersion version) : version_(version) {}

StatusOr<bool> MemoryNodeOs::CgroupExists(const std::string& cgroup) {
  STAR_RETURN_IF_ERROR(CheckCgroupPath(cgroup));
  std::lock_guard lock(mu_);
  return cgroups_.count(cgroup) > 0;
}

StatusOr<CpuLimits> MemoryNodeOs::ReadCpu(const std::string& cgroup) {
  STAR_RETURN_IF_ERROR(CheckCgroupPath(cgroup));
  std::lock_guard lock(mu_);
  auto it = cgroups_.find(cgroup);
  if (it == cgroups_.end()) return Status::NotFound("cgroup " + cgroup);
  return it->second.limits;
}

Status MemoryNodeOs::WriteCpu(const std::string& cgroup, const CpuLimits& limits) {
  STAR_RETURN_IF_ERROR(CheckCgroupPath(cgroup));
  STAR_RETURN_IF_ERROR(CheckCpuLimits(limits));
  std::lock_guard lock(mu_);
  auto it = cgroups_.find(cgroup);
  if (it == cgroups_.end()) return Status::NotFound("cgroup " + cgroup);
  it->second.limits = limits;
  ++it->second.writes;
  ++cpu_writes_;
  return Status::Ok();
}

StatusOr<CpuStats> MemoryNodeOs::ReadCpuStats(const std::string& cgroup) {
  STAR_RETURN_IF_ERROR(CheckCgroupPath(cgroup));
  std::lock_guard lock(mu_);
  auto it = cgroups_.find(cgroup);
  if (it == cgroups_.end()) return Status::NotFound("cgroup " + cgroup);
  return it->second.stats;
}

StatusOr<std::vector<std::string>> MemoryNodeOs::ListCgroups(const std::string& cgroup) {
  STAR_RETURN_IF_ERROR(CheckCgroupPath(cgroup));
  std::lock_guard lock(mu_);
  const std::string prefix = cgroup + "/";
  bool exists = cgroups_.count(cgroup) > 0;
  std::set<std::string> names;
  for (auto it = cgroups_.lower_bound(prefix);
       it != cgroups_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    exists = true;
    names.insert(it->first.substr(prefix.size(), it->first.find('/', prefix.size()) - prefix.size()));
  }
  if (!exists) return Status::NotFound("cgroup " + cgroup);
  return std::vector<std::string>(names.begin(), names.end());
}

StatusOr<bool> MemoryNodeOs::InterfaceExists(const std::string& ifname) {
  STAR_RETURN_IF_ERROR(CheckIfname(ifname));
  std::lock_guard lock(mu_);
  return interfaces_.count(ifname) > 0;
}

StatusOr<NetLimits> MemoryNodeOs::ReadNet(const std::string& ifname) {
  STAR_RETURN_IF_ERROR(CheckIfname(ifname));
  std::lock_guard lock(mu_);
  auto it = interfaces_.find(ifname);
  if (it == interfaces_.end()) return Status::NotFound("interface " + ifname);
  return it->second.limits;
}

Status MemoryNodeOs::WriteNet(const std::string& ifname, const NetLimits& limits) {
  STAR_RETURN_IF_ERROR(CheckIfname(ifname));
  STAR_RETURN_IF_ERROR(CheckNetLimits(limits));
  std::lock_guard lock(mu_);
  auto it = interfaces_.find(ifname);
  if (it == interfaces_.end()) return Status::NotFound("interface " + ifname);
  // Like the real implementation: with no rate installed the priority is not kept.
  NetLimits stored = limits;
  if (stored.egress_bits_per_second == 0 && stored.ingress_bits_per_second == 0) stored = {};
  // Like the real implementation: rates are kept in whole bytes per second.
  stored.egress_bits_per_second = stored.egress_bits_per_second / 8 * 8;
  stored.ingress_bits_per_second = stored.ingress_bits_per_second / 8 * 8;
  it->second.limits = stored;
  ++it->second.writes;
  ++net_writes_;
  return Status::Ok();
}

StatusOr<NetStats> MemoryNodeOs::ReadNetStats(const std::string& ifname) {
  STAR_RETURN_IF_ERROR(CheckIfname(ifname));
  std::lock_guard lock(mu_);
  auto it = interfaces_.find(ifname);
  if (it == interfaces_.end()) return Status::NotFound("interface " + ifname);
  return it->second.stats;
}

void MemoryNodeOs::AddCgroup(const std::string& cgroup, const CpuLimits& limits) {
  std::lock_guard lock(mu_);
  cgroups_[cgroup].limits = limits;
}

void MemoryNodeOs::RemoveCgroup(const std::string& cgroup) {
  std::lock_guard lock(mu_);
  cgroups_.erase(cgroup);
}

void MemoryNodeOs::SetCpuStats(const std::string& cgroup, const CpuStats& stats) {
  std::lock_guard lock(mu_);
  cgroups_[cgroup].stats = stats;
}

void MemoryNodeOs::AddInterface(const std::string& ifname, const NetLimits& limits) {
  std::lock_guard lock(mu_);
  interfaces_[ifname].limits = limits;
}

void MemoryNodeOs::RemoveInterface(const std::string& ifname) {
  std::lock_guard lock(mu_);
  interfaces_.erase(ifname);
}

void MemoryNodeOs::SetNetStats(const std::string& ifname, const NetStats& stats) {
  std::lock_guard lock(mu_);
  interfaces_[ifname].stats = stats;
}

StatusOr<std::string> MemoryNodeOs::PodInterface(const std::string& cgroup) {
  STAR_RETURN_IF_ERROR(CheckCgroupPath(cgroup));
  std::lock_guard lock(mu_);
  ++pod_interface_calls_;
  auto it = pod_interfaces_.find(cgroup);
  if (it == pod_interfaces_.end()) return Status::NotFound("no process in cgroup " + cgroup);
  return it->second;
}

void MemoryNodeOs::SetPodInterface(const std::string& cgroup, StatusOr<std::string> answer) {
  std::lock_guard lock(mu_);
  pod_interfaces_.insert_or_assign(cgroup, std::move(answer));
}

int64_t MemoryNodeOs::pod_interface_calls() const {
  std::lock_guard lock(mu_);
  return pod_interface_calls_;
}

int64_t MemoryNodeOs::cpu_writes() const {
  std::lock_guard lock(mu_);
  return cpu_writes_;
}

int64_t MemoryNodeOs::net_writes() const {
  std::lock_guard lock(mu_);
  return net_writes_;
}

int64_t MemoryNodeOs::cpu_writes(const std::string& cgroup) const {
  std::lock_guard lock(mu_);
  auto it = cgroups_.find(cgroup);
  return it == cgroups_.end() ? 0 : it->second.writes;
}

int64_t MemoryNodeOs::net_writes(const std::string& ifname) const {
  std::lock_guard lock(mu_);
  auto it = interfaces_.find(ifname);
  return it == interfaces_.end() ? 0 : it->second.writes;
}

}  // namespace star::agent
