#include "local/memory_host.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cmath>

#include "star/agent/real_node_os.h"

namespace star::local {
namespace {

std::string CpuText(const agent::CpuLimits& l) {
  return std::to_string(l.quota_us) + "/" + std::to_string(l.period_us) + "/" +
         std::to_string(l.weight);
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

MemoryHost::MemoryHost(agent::CgroupVersion version, bool netem)
    : version_(version), netem_(netem), os_(version) {}

Status MemoryHost::Record(const std::string& call) {
  calls_.push_back(call);
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (StartsWith(call, it->first)) {
      Status st = it->second;
      faults_.erase(it);
      return st;
    }
  }
  return Status::Ok();
}

void MemoryHost::FailNext(const std::string& call_prefix, Status status) {
  std::lock_guard lock(mu_);
  faults_.emplace_back(call_prefix, std::move(status));
}

// ---- cgroups ----

Status MemoryHost::CreateCgroup(const std::string& cgroup, bool existing_ok) {
  STAR_RETURN_IF_ERROR(CheckCgroupPath(cgroup));
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("CreateCgroup " + cgroup));
  const std::string parent = ParentCgroup(cgroup);
  if (!parent.empty() && cgroups_.count(parent) == 0) {
    return Status::NotFound("cgroup " + parent + " does not exist");
  }
  if (cgroups_.count(cgroup) != 0) {
    return existing_ok ? Status::Ok() : Status::AlreadyExists("cgroup " + cgroup + " exists");
  }
  cgroups_[cgroup];
  os_.AddCgroup(cgroup);
  return Status::Ok();
}

bool MemoryHost::CgroupExists(const std::string& cgroup) {
  std::lock_guard lock(mu_);
  return cgroups_.count(cgroup) != 0;
}

std::vector<std::string> MemoryHost::ChildCgroups(const std::string& cgroup) {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [path, pids] : cgroups_) {
    if (ParentCgroup(path) == cgroup) out.push_back(path.substr(cgroup.size() + 1));
  }
  return out;
}

std::vector<pid_t> MemoryHost::CgroupProcesses(const std::string& cgroup) {
  std::lock_guard lock(mu_);
  auto it = cgroups_.find(cgroup);
  if (it == cgroups_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

Status MemoryHost::MoveProcess(const std::string& cgroup, pid_t pid) {
  STAR_RETURN_IF_ERROR(CheckCgroupPath(cgroup));
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("MoveProcess " + cgroup + " " + std::to_string(pid)));
  auto it = cgroups_.find(cgroup);
  if (it == cgroups_.end()) return Status::NotFound("cgroup " + cgroup + " does not exist");
  for (auto& [path, pids] : cgroups_) pids.erase(pid);
  it->second.insert(pid);
  return Status::Ok();
}

Status MemoryHost::RemoveCgroup(const std::string& cgroup) {
  STAR_RETURN_IF_ERROR(CheckCgroupPath(cgroup));
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("RemoveCgroup " + cgroup));
  auto it = cgroups_.find(cgroup);
  if (it == cgroups_.end()) return Status::Ok();
  if (!it->second.empty()) return Status::FailedPrecondition("cgroup " + cgroup + " is busy");
  for (const auto& [path, pids] : cgroups_) {
    if (ParentCgroup(path) == cgroup) {
      return Status::FailedPrecondition("cgroup " + cgroup + " has children");
    }
  }
  cgroups_.erase(it);
  cpu_.erase(cgroup);
  os_.RemoveCgroup(cgroup);
  return Status::Ok();
}

Status MemoryHost::WriteCpu(const std::string& cgroup, const agent::CpuLimits& limits) {
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("WriteCpu " + cgroup + " " + CpuText(limits)));
  STAR_RETURN_IF_ERROR(os_.WriteCpu(cgroup, limits));
  cpu_[cgroup] = limits;
  return Status::Ok();
}

void MemoryHost::Kill(pid_t pid) {
  std::lock_guard lock(mu_);
  (void)Record("Kill " + std::to_string(pid));
  for (auto& [path, pids] : cgroups_) pids.erase(pid);  // it exits at once
}

// ---- network ----

std::vector<std::string> MemoryHost::Links() {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, link] : links_) out.push_back(name);
  return out;
}

bool MemoryHost::LinkExists(const std::string& ifname) {
  std::lock_guard lock(mu_);
  return links_.count(ifname) != 0;
}

Status MemoryHost::DeleteLink(const std::string& ifname) {
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("DeleteLink " + ifname));
  auto it = links_.find(ifname);
  if (it == links_.end()) return Status::NotFound("interface " + ifname + " does not exist");
  if (auto ns = namespaces_.find(it->second.peer_ns); ns != namespaces_.end()) {
    ns->second.clear();  // a veth's peer goes with it
  }
  std::erase_if(addresses_, [&](const Address& a) {
    return a.ifname == ifname || (a.ns == it->second.peer_ns && !a.ns.empty());
  });
  links_.erase(it);
  os_.RemoveInterface(ifname);
  return Status::Ok();
}

std::vector<std::string> MemoryHost::Namespaces() {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, links] : namespaces_) out.push_back(name);
  return out;
}

Status MemoryHost::CreateNamespace(const std::string& ns) {
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("CreateNamespace " + ns));
  if (namespaces_.count(ns) != 0) return Status::AlreadyExists("namespace " + ns + " exists");
  namespaces_[ns];
  return Status::Ok();
}

Status MemoryHost::DeleteNamespace(const std::string& ns) {
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("DeleteNamespace " + ns));
  if (namespaces_.erase(ns) == 0) return Status::NotFound("namespace " + ns + " does not exist");
  std::erase_if(addresses_, [&](const Address& a) { return a.ns == ns; });
  std::erase_if(delays_, [&](const auto& d) { return d.first.first == ns; });
  std::erase_if(uplinks_, [&](const auto& d) { return d.first.first == ns; });
  for (auto it = links_.begin(); it != links_.end();) {  // its veths' host sides go too
    it = it->second.kind == "veth" && it->second.peer_ns == ns ? links_.erase(it) : std::next(it);
  }
  return Status::Ok();
}

Status MemoryHost::CreateBridge(const std::string& bridge) {
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("CreateBridge " + bridge));
  if (links_.count(bridge) != 0) return Status::AlreadyExists("interface " + bridge + " exists");
  links_[bridge] = Link{"bridge", ""};
  os_.AddInterface(bridge);
  return Status::Ok();
}

Status MemoryHost::CreateVeth(const std::string& host_ifname, const std::string& bridge,
                              const std::string& ns, const std::string& peer) {
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("CreateVeth " + host_ifname + " " + bridge + " " + ns + " " + peer));
  if (links_.count(host_ifname) != 0) {
    return Status::AlreadyExists("interface " + host_ifname + " exists");
  }
  if (links_.count(bridge) == 0) return Status::NotFound("bridge " + bridge + " does not exist");
  auto it = namespaces_.find(ns);
  if (it == namespaces_.end()) return Status::NotFound("namespace " + ns + " does not exist");
  if (!it->second.insert(peer).second) {
    return Status::AlreadyExists("interface " + peer + " exists in " + ns);
  }
  links_[host_ifname] = Link{"veth", ns};
  os_.AddInterface(host_ifname);
  return Status::Ok();
}

StatusOr<std::vector<InterfaceAddress>> MemoryHost::Addresses() {
  std::lock_guard lock(mu_);
  std::vector<InterfaceAddress> out = foreign_;
  for (const Address& a : addresses_) {
    if (!a.ns.empty()) continue;
    in_addr ip{};
    if (::inet_pton(AF_INET, a.cidr.substr(0, a.cidr.find('/')).c_str(), &ip) == 1) {
      out.push_back({a.ifname, ntohl(ip.s_addr)});
    }
  }
  return out;
}

Status MemoryHost::AddAddress(const std::string& ns, const std::string& ifname,
                              const std::string& cidr) {
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("AddAddress " + ns + " " + ifname + " " + cidr));
  const bool exists = ns.empty() ? links_.count(ifname) != 0
                                 : namespaces_.count(ns) != 0 && namespaces_[ns].count(ifname) != 0;
  if (!exists) return Status::NotFound("interface " + ifname + " does not exist");
  addresses_.push_back({ns, ifname, cidr});
  return Status::Ok();
}

Status MemoryHost::DeleteAddress(const std::string& ns, const std::string& ifname,
                                 const std::string& cidr) {
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("DeleteAddress " + ns + " " + ifname + " " + cidr));
  auto it = std::find(addresses_.begin(), addresses_.end(), Address{ns, ifname, cidr});
  if (it == addresses_.end()) return Status::NotFound("address " + cidr + " not on " + ifname);
  addresses_.erase(it);
  return Status::Ok();
}

Status MemoryHost::BringUp(const std::string& ns, const std::string& ifname,
                           const std::string& gateway) {
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("BringUp " + ns + " " + ifname + " " + gateway));
  auto it = namespaces_.find(ns);
  if (it == namespaces_.end() || it->second.count(ifname) == 0) {
    return Status::NotFound("interface " + ifname + " not in namespace " + ns);
  }
  return Status::Ok();
}

Status MemoryHost::WriteNet(const std::string& ifname, const agent::NetLimits& limits) {
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("WriteNet " + ifname + " " +
                              std::to_string(limits.egress_bits_per_second) + "/" +
                              std::to_string(limits.ingress_bits_per_second)));
  STAR_RETURN_IF_ERROR(os_.WriteNet(ifname, limits));
  const std::string ifb = agent::IfbName(ifname);  // as RealNodeOs makes it
  if (limits.ingress_bits_per_second > 0) {
    links_.emplace(ifb, Link{"ifb", ""});
  } else {
    links_.erase(ifb);
  }
  return Status::Ok();
}

Status MemoryHost::SetDelay(const std::string& ns, const std::string& ifname, double seconds) {
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("SetDelay " + ns + " " + ifname + " " + std::to_string(seconds)));
  if (namespaces_.count(ns) == 0 || namespaces_[ns].count(ifname) == 0) {
    return Status::NotFound("interface " + ifname + " not in namespace " + ns);
  }
  if (seconds == 0) {
    delays_.erase({ns, ifname});
    return Status::Ok();
  }
  if (!netem_) {
    return Status::Unavailable("netem delay on " + ifname +
                               ": the kernel has no netem qdisc: CONFIG_NET_SCH_NETEM");
  }
  delays_[{ns, ifname}] = seconds;
  return Status::Ok();
}

Status MemoryHost::SetUplinkShare(const std::string& ns, const std::string& ifname,
                                  const UplinkShare& share) {
  std::lock_guard lock(mu_);
  STAR_RETURN_IF_ERROR(Record("SetUplinkShare " + ns + " " + ifname + " " +
                              std::to_string(share.link_bps) + "/" +
                              std::to_string(share.neighbor_bps) + " " + share.neighbor_address));
  if (namespaces_.count(ns) == 0 || namespaces_[ns].count(ifname) == 0) {
    return Status::NotFound("interface " + ifname + " not in namespace " + ns);
  }
  if (share.link_bps == 0) {
    uplinks_.erase({ns, ifname});
  } else {
    uplinks_[{ns, ifname}] = share;
  }
  return Status::Ok();
}

// ---- for tests ----

std::vector<std::string> MemoryHost::cgroups() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [path, pids] : cgroups_) out.push_back(path);
  return out;
}

std::optional<agent::CpuLimits> MemoryHost::cpu(const std::string& cgroup) const {
  std::lock_guard lock(mu_);
  auto it = cpu_.find(cgroup);
  if (it == cpu_.end()) return std::nullopt;
  return it->second;
}

agent::NetLimits MemoryHost::net(const std::string& ifname) const {
  auto l = os_.ReadNet(ifname);
  return l.ok() ? *l : agent::NetLimits{};
}

double MemoryHost::delay(const std::string& ns, const std::string& ifname) const {
  std::lock_guard lock(mu_);
  auto it = delays_.find({ns, ifname});
  return it == delays_.end() ? 0 : it->second;
}

UplinkShare MemoryHost::uplink(const std::string& ns, const std::string& ifname) const {
  std::lock_guard lock(mu_);
  auto it = uplinks_.find({ns, ifname});
  return it == uplinks_.end() ? UplinkShare{} : it->second;
}

std::vector<std::string> MemoryHost::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

std::vector<std::string> MemoryHost::calls(const std::string& prefix) const {
  std::vector<std::string> out;
  for (const std::string& c : calls()) {
    if (StartsWith(c, prefix)) out.push_back(c);
  }
  return out;
}

bool MemoryHost::empty_except(const std::set<std::string>& keep) const {
  std::lock_guard lock(mu_);
  for (const auto& [path, pids] : cgroups_) {
    if (keep.count(path) == 0) return false;
  }
  return links_.empty() && namespaces_.empty() && addresses_.empty() && delays_.empty() &&
         uplinks_.empty();
}

void MemoryHost::AddProcess(const std::string& cgroup, pid_t pid) {
  std::lock_guard lock(mu_);
  auto it = cgroups_.find(cgroup);
  if (it != cgroups_.end()) it->second.insert(pid);
}

void MemoryHost::AddForeignAddress(const std::string& ifname, uint32_t address) {
  std::lock_guard lock(mu_);
  foreign_.push_back({ifname, address});
}

}  // namespace star::local
