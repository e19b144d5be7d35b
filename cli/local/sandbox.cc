#include "local/sandbox.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "local/host.h"
#include "local/netns_util.h"
#include "local/real_host.h"
#include "star/agent/real_node_os.h"
#include "star/core/common/hash.h"

namespace star::local {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxSlots = 64;
constexpr size_t kMaxNameLength = 63;
constexpr size_t kMaxNetnsLength = 48;
constexpr auto kKillWait = std::chrono::seconds(5);
constexpr double kMaxDelaySeconds = 60;
constexpr int kSubnetSecondOctet = 213;  // 10.213.0.0/16

std::string Hex6(std::string_view s) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%06x", Fnv1a32(s) & 0xffffffu);
  return buf;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

Status CheckName(const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("SandboxOptions.name: required");
  if (name.size() > kMaxNameLength) {
    return Status::InvalidArgument("SandboxOptions.name: must be at most 63 characters, got " +
                                   std::to_string(name.size()));
  }
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(name[0])) {
    return Status::InvalidArgument(
        "SandboxOptions.name: must start with a letter or digit, got \"" + name + "\"");
  }
  for (char c : name) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') {
      return Status::InvalidArgument(
          "SandboxOptions.name: only letters, digits, '-', '_' and '.' are allowed, got \"" + name +
          "\"");
    }
  }
  return Status::Ok();
}

Status CheckCgroupRoot(const std::string& root) {
  const std::string field = "cgroup_root \"" + root + "\": ";
  if (root.empty()) return Status::InvalidArgument(field + "must not be empty");
  if (root.front() == '/' || root.back() == '/') {
    return Status::InvalidArgument(field + "must be relative, without a leading or trailing '/'");
  }
  std::stringstream ss(root);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return Status::InvalidArgument(field + "empty, \".\" and \"..\" components are not allowed");
    }
    for (char c : part) {
      if (static_cast<unsigned char>(c) <= ' ') {
        return Status::InvalidArgument(field + "must not contain whitespace or control characters");
      }
    }
  }
  return Status::Ok();
}

// ---- Names: everything derived from (cgroup_root, name, owner pid). ----

struct Names {
  std::string root;
  std::string name;
  pid_t pid = 0;

  std::string id() const { return name + "-" + std::to_string(pid); }
  std::string job_cgroup() const { return root + "/" + id(); }
  std::string bridge() const { return "stb" + Hex6(id()); }
  std::string veth_prefix() const { return "stv" + Hex6(id()); }
  std::string veth(int slot) const { return veth_prefix() + std::to_string(slot); }
  std::string netns_prefix() const {
    std::string full = "star-" + id() + "-";
    if (full.size() + 2 <= kMaxNetnsLength) return full;
    return "star-" + Hex6(id()) + "-";
  }
  std::string netns(int slot) const { return netns_prefix() + std::to_string(slot); }
};

// ---- Names alive in this process (AlreadyExists). ----

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}
std::set<std::string>& Registry() {
  static std::set<std::string> names;
  return names;
}
bool Reserve(const std::string& name) {
  std::lock_guard lock(RegistryMutex());
  return Registry().insert(name).second;
}
void Release(const std::string& name) {
  std::lock_guard lock(RegistryMutex());
  Registry().erase(name);
}

// ---- Cgroups ----

// `cgroup` and every cgroup below it, children before their parent.
void PostOrder(Host& host, const std::string& cgroup, std::vector<std::string>* out) {
  for (const std::string& sub : host.ChildCgroups(cgroup)) PostOrder(host, cgroup + "/" + sub, out);
  out->push_back(cgroup);
}

// Kills every process in the job's cgroups until they are empty, for at most kKillWait.
// The calling process itself is never killed.
Status KillCgroupProcesses(Host& host, const std::string& job) {
  const auto deadline = Clock::now() + kKillWait;
  const pid_t self = ::getpid();
  for (;;) {
    std::set<pid_t> pids;
    if (host.CgroupExists(job)) {
      std::vector<std::string> cgroups;
      PostOrder(host, job, &cgroups);
      for (const std::string& cg : cgroups) {
        for (pid_t p : host.CgroupProcesses(cg)) {
          if (p > 0 && p != self) pids.insert(p);
        }
      }
    }
    if (pids.empty()) return Status::Ok();
    if (Clock::now() >= deadline) {
      std::string list;
      for (pid_t p : pids) list += (list.empty() ? "" : ", ") + std::to_string(p);
      return Status::DeadlineExceeded("cgroup " + job + ": processes still there " +
                                      std::to_string(kKillWait.count()) + " s after SIGKILL: " +
                                      list);
    }
    for (pid_t p : pids) host.Kill(p);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling an exit, bounded
  }
}

// Removes the job's cgroups, children first; absent is OK.
Status RemoveCgroups(Host& host, const std::string& job) {
  if (!host.CgroupExists(job)) return Status::Ok();
  std::vector<std::string> cgroups;
  PostOrder(host, job, &cgroups);
  Status first;
  for (const std::string& cg : cgroups) {
    if (Status st = host.RemoveCgroup(cg); !st.ok() && first.ok()) first = st;
  }
  return first;
}

// Creates the cgroup root (when missing) and the job's cgroups.
Status CreateCgroups(Host& host, const Names& n, int slots) {
  std::string path;
  std::stringstream ss(n.root);
  for (std::string part; std::getline(ss, part, '/');) {
    path += (path.empty() ? "" : "/") + part;
    STAR_RETURN_IF_ERROR(host.CreateCgroup(path, /*existing_ok=*/true));
  }
  std::vector<std::string> cgroups = {n.job_cgroup(), n.job_cgroup() + "/eval"};
  for (int i = 0; i < slots; ++i) {
    const std::string slot = n.job_cgroup() + "/slot" + std::to_string(i);
    cgroups.insert(cgroups.end(), {slot, slot + "/main", slot + "/neighbor"});
  }
  for (const std::string& cg : cgroups) {
    STAR_RETURN_IF_ERROR(host.CreateCgroup(cg, /*existing_ok=*/false));
  }
  return Status::Ok();
}

// ---- Network ----

// Removes every veth (with the IFB device NodeOs made for its ingress shaping), namespace
// and the bridge named after `n`; absent ones are fine.
Status RemoveNetwork(Host& host, const Names& n) {
  Status first;
  auto keep = [&first](Status s) {
    if (!s.ok() && first.ok()) first = std::move(s);
  };
  const std::string veth_prefix = n.veth_prefix();
  for (const std::string& link : host.Links()) {
    if (!StartsWith(link, veth_prefix) || !AllDigits(link.substr(veth_prefix.size()))) continue;
    if (const std::string ifb = agent::IfbName(link); host.LinkExists(ifb)) {
      keep(host.DeleteLink(ifb));
    }
    // Deleting the host side takes the namespace side with it, synchronously (a deleted
    // namespace would release its veth only later, asynchronously).
    if (host.LinkExists(link)) keep(host.DeleteLink(link));
  }
  const std::string ns_prefix = n.netns_prefix();
  for (const std::string& ns : host.Namespaces()) {
    if (StartsWith(ns, ns_prefix) && AllDigits(ns.substr(ns_prefix.size()))) {
      keep(host.DeleteNamespace(ns));
    }
  }
  if (host.LinkExists(n.bridge())) keep(host.DeleteLink(n.bridge()));
  return first;
}

// Removes everything named after `n`: processes, network, cgroups. The job cgroup is the
// anchor SweepStaleSandboxes finds leftovers by, so it is removed only once the network is
// gone; every other step is tried whatever failed before.
Status RemoveAll(Host& host, const Names& n) {
  Status first = KillCgroupProcesses(host, n.job_cgroup());
  Status net = RemoveNetwork(host, n);
  if (!net.ok()) return first.ok() ? net : first;
  Status cg = RemoveCgroups(host, n.job_cgroup());
  return first.ok() ? cg : first;
}

// The third octets S of every IPv4 address in 10.213.0.0/16 on the root namespace's
// interfaces, except those on interface `except`.
StatusOr<std::set<int>> UsedSubnets(Host& host, const std::string& except) {
  STAR_ASSIGN_OR_RETURN(std::vector<InterfaceAddress> addresses, host.Addresses());
  std::set<int> used;
  for (const InterfaceAddress& a : addresses) {
    if (a.ifname == except) continue;
    if ((a.address >> 24) == 10 && ((a.address >> 16) & 0xff) == kSubnetSecondOctet) {
      used.insert(static_cast<int>((a.address >> 8) & 0xff));
    }
  }
  return used;
}

std::string Address(int subnet, int host) {
  return "10." + std::to_string(kSubnetSecondOctet) + "." + std::to_string(subnet) + "." +
         std::to_string(host);
}

// Creates the bridge with a free /24 and returns S. Concurrent creators (other `star
// local` processes) are detected after the fact: when another interface holds an
// address in our /24 once ours is up, we give it up and try the next one.
StatusOr<int> CreateBridge(Host& host, const Names& n) {
  static std::mutex mu;  // sandboxes of this process never race each other for a /24
  std::lock_guard lock(mu);
  const std::string br = n.bridge();
  STAR_RETURN_IF_ERROR(host.CreateBridge(br));
  const int start = static_cast<int>(Fnv1a32(n.id()) % 256);
  std::set<int> tried;
  for (int k = 0; k < 256; ++k) {
    const int s = (start + k) % 256;
    if (tried.count(s) != 0) continue;
    STAR_ASSIGN_OR_RETURN(std::set<int> used, UsedSubnets(host, br));
    if (used.count(s) != 0) continue;
    const std::string cidr = Address(s, 1) + "/24";
    STAR_RETURN_IF_ERROR(host.AddAddress("", br, cidr));
    STAR_ASSIGN_OR_RETURN(std::set<int> after, UsedSubnets(host, br));
    if (after.count(s) == 0) return s;
    tried.insert(s);  // raced with another sandbox: give this /24 up
    STAR_RETURN_IF_ERROR(host.DeleteAddress("", br, cidr));
  }
  return Status::Unavailable("no free /24 in 10.213.0.0/16 for the sandbox bridge " + br);
}

Status CreateSlotNetwork(Host& host, const Names& n, int subnet, int slot) {
  const std::string ns = n.netns(slot);
  STAR_RETURN_IF_ERROR(host.CreateNamespace(ns));
  STAR_RETURN_IF_ERROR(host.CreateVeth(n.veth(slot), n.bridge(), ns, Sandbox::kSlotIfname));
  STAR_RETURN_IF_ERROR(host.AddAddress(ns, Sandbox::kSlotIfname, Address(subnet, slot + 2) + "/24"));
  return host.BringUp(ns, Sandbox::kSlotIfname, Address(subnet, 1));
}

// Checks every option (InvalidArgument naming it).
Status CheckOptions(const SandboxOptions& options) {
  STAR_RETURN_IF_ERROR(CheckName(options.name));
  if (options.slots < 1 || options.slots > kMaxSlots) {
    return Status::InvalidArgument("SandboxOptions.slots: must be in 1..64, got " +
                                   std::to_string(options.slots));
  }
  return CheckCgroupRoot(options.cgroup_root).WithPrefix("SandboxOptions");
}

// What a real sandbox needs besides valid options: root and `ip` for the network.
Status CheckMachine(const SandboxOptions& options) {
  if (options.network && ::geteuid() != 0) {
    return Status::FailedPrecondition(
        "SandboxOptions.network: network namespaces need root (or set network = false)");
  }
  if (options.network) {
    if (auto ip = FindSystemProgram("ip"); !ip.ok()) {
      return Status::FailedPrecondition("SandboxOptions.network: needs iproute2's `ip`: " +
                                        ip.status().message());
    }
  }
  return Status::Ok();
}

}  // namespace

// ---- Sandbox ----

StatusOr<std::unique_ptr<Sandbox>> Sandbox::Create(const SandboxOptions& options) {
  STAR_RETURN_IF_ERROR(CheckOptions(options));
  STAR_RETURN_IF_ERROR(CheckMachine(options));
  RealHostOptions ho;
  ho.allowed_prefix = Names{options.cgroup_root, options.name, ::getpid()}.job_cgroup();
  STAR_ASSIGN_OR_RETURN(std::unique_ptr<Host> host, NewRealHost(ho));
  Host& h = *host;
  return Create(options, h, std::move(host));
}

StatusOr<std::unique_ptr<Sandbox>> Sandbox::Create(const SandboxOptions& options, Host& host) {
  STAR_RETURN_IF_ERROR(CheckOptions(options));
  return Create(options, host, nullptr);
}

StatusOr<std::unique_ptr<Sandbox>> Sandbox::Create(const SandboxOptions& options, Host& host,
                                                   std::unique_ptr<Host> owned) {
  if (!Reserve(options.name)) {
    return Status::AlreadyExists("sandbox \"" + options.name + "\" already exists in this process");
  }
  std::unique_ptr<Sandbox> sb(new Sandbox());
  sb->owned_host_ = std::move(owned);
  sb->host_ = &host;
  sb->name_ = options.name;
  sb->cgroup_root_ = options.cgroup_root;
  sb->owner_ = ::getpid();
  sb->slots_ = options.slots;
  sb->network_ = options.network;
  const Names n{options.cgroup_root, options.name, sb->owner_};
  // A previous process with our pid (or an earlier sandbox of ours whose teardown failed)
  // may have left resources with exactly our names: nobody alive owns them.
  // (Cheap when there are none: nothing but listings.)
  Status st = RemoveAll(host, n).WithPrefix("removing leftovers of an earlier " + n.id());
  if (st.ok()) st = CreateCgroups(host, n, options.slots);
  if (st.ok() && options.network) st = sb->CreateNetwork();
  if (st.ok()) return sb;
  if (Status undo = RemoveAll(host, n); !undo.ok()) {
    std::cerr << "star local: sandbox " << options.name << ": cleanup after a failed create: "
              << undo << "\n";
  }
  sb->torn_down_ = true;  // the destructor has nothing left to do
  Release(options.name);
  return st;
}

Status Sandbox::CreateNetwork() {
  const Names n{cgroup_root_, name_, owner_};
  auto subnet = CreateBridge(*host_, n);
  if (!subnet.ok()) return subnet.status().WithPrefix("sandbox network");
  subnet_ = *subnet;
  for (int i = 0; i < slots_; ++i) {
    STAR_RETURN_IF_ERROR(CreateSlotNetwork(*host_, n, subnet_, i)
                             .WithPrefix("sandbox network, slot " + std::to_string(i)));
  }
  return Status::Ok();
}

Sandbox::~Sandbox() {
  Status st = Teardown();
  if (!st.ok()) std::cerr << "star local: sandbox " << name_ << ": teardown: " << st << "\n";
  bool release = false;
  {
    std::lock_guard lock(mu_);
    release = !torn_down_;  // an OK Teardown released the name already
  }
  if (release) Release(name_);
}

Status Sandbox::Teardown() {
  std::lock_guard lock(mu_);
  if (torn_down_) return Status::Ok();
  Status st = RemoveAll(*host_, Names{cgroup_root_, name_, owner_});
  if (!st.ok()) return st;
  torn_down_ = true;
  Release(name_);
  return Status::Ok();
}

std::string Sandbox::job_cgroup() const { return Names{cgroup_root_, name_, owner_}.job_cgroup(); }

std::string Sandbox::slot_cgroup(int slot) const {
  if (slot < 0 || slot >= slots_) return "";
  return job_cgroup() + "/slot" + std::to_string(slot);
}
std::string Sandbox::main_cgroup(int slot) const {
  const std::string s = slot_cgroup(slot);
  return s.empty() ? s : s + "/main";
}
std::string Sandbox::neighbor_cgroup(int slot) const {
  const std::string s = slot_cgroup(slot);
  return s.empty() ? s : s + "/neighbor";
}
std::string Sandbox::eval_cgroup() const { return job_cgroup() + "/eval"; }

std::string Sandbox::host_address() const {
  return network_ ? Address(subnet_, 1) : "127.0.0.1";
}
std::string Sandbox::slot_address(int slot) const {
  if (slot < 0 || slot >= slots_) return "";
  return network_ ? Address(subnet_, slot + 2) : "127.0.0.1";
}
std::string Sandbox::host_ifname(int slot) const {
  if (!network_ || slot < 0 || slot >= slots_) return "";
  return Names{cgroup_root_, name_, owner_}.veth(slot);
}
std::string Sandbox::bridge_ifname() const {
  return network_ ? Names{cgroup_root_, name_, owner_}.bridge() : "";
}
std::string Sandbox::netns(int slot) const {
  if (!network_ || slot < 0 || slot >= slots_) return "";
  return Names{cgroup_root_, name_, owner_}.netns(slot);
}

Status Sandbox::SetDelay(int slot, double seconds) {
  if (!network_) {
    return Status::Unavailable("SetDelay: the sandbox has no network namespaces (network = false)");
  }
  if (slot < 0 || slot >= slots_) {
    return Status::InvalidArgument("SetDelay: slot: must be in [0, " + std::to_string(slots_) +
                                   "), got " + std::to_string(slot));
  }
  if (!std::isfinite(seconds) || seconds < 0 || seconds > kMaxDelaySeconds) {
    return Status::InvalidArgument("SetDelay: seconds: must be in [0, 60], got " +
                                   std::to_string(seconds));
  }
  {
    std::lock_guard lock(mu_);
    if (torn_down_) return Status::FailedPrecondition("SetDelay: the sandbox was torn down");
  }
  return host_->SetDelay(netns(slot), kSlotIfname, seconds)
      .WithPrefix("SetDelay: slot " + std::to_string(slot));
}

Status Sandbox::SetUplinkShare(int slot, const UplinkShare& share) {
  if (!network_) {
    return Status::Unavailable("SetUplinkShare: the sandbox has no network namespaces (network = false)");
  }
  if (slot < 0 || slot >= slots_) {
    return Status::InvalidArgument("SetUplinkShare: slot: must be in [0, " + std::to_string(slots_) +
                                   "), got " + std::to_string(slot));
  }
  if (share.link_bps != 0 && share.neighbor_bps != 0 &&
      (share.neighbor_bps < 8000 || share.neighbor_bps >= share.link_bps)) {
    return Status::InvalidArgument("SetUplinkShare: neighbor_bps: must be 0 or in [8000, " +
                                   std::to_string(share.link_bps) + "), got " +
                                   std::to_string(share.neighbor_bps));
  }
  {
    std::lock_guard lock(mu_);
    if (torn_down_) return Status::FailedPrecondition("SetUplinkShare: the sandbox was torn down");
  }
  return host_->SetUplinkShare(netns(slot), kSlotIfname, share)
      .WithPrefix("SetUplinkShare: slot " + std::to_string(slot));
}

// ---- Sweep ----

StatusOr<int> SweepStaleSandboxes(const std::string& cgroup_root) {
  STAR_RETURN_IF_ERROR(CheckCgroupRoot(cgroup_root).WithPrefix("SweepStaleSandboxes"));
  RealHostOptions ho;
  ho.allowed_prefix = cgroup_root;
  STAR_ASSIGN_OR_RETURN(std::unique_ptr<Host> host, NewRealHost(ho));
  return SweepStaleSandboxes(*host, cgroup_root);
}

StatusOr<int> SweepStaleSandboxes(Host& host, const std::string& cgroup_root) {
  STAR_RETURN_IF_ERROR(CheckCgroupRoot(cgroup_root).WithPrefix("SweepStaleSandboxes"));
  int removed = 0;
  Status first;
  for (const std::string& entry : host.ChildCgroups(cgroup_root)) {
    const size_t dash = entry.rfind('-');
    if (dash == std::string::npos || !AllDigits(entry.substr(dash + 1))) continue;
    const std::string name = entry.substr(0, dash);
    if (!CheckName(name).ok() || entry.size() - dash - 1 > 9) continue;
    const auto pid = static_cast<pid_t>(std::stol(entry.substr(dash + 1)));
    if (pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno == EPERM) continue;  // the owner is alive
    const Status st = RemoveAll(host, Names{cgroup_root, name, pid});
    if (st.ok()) {
      ++removed;
    } else if (first.ok()) {
      first = st.WithPrefix("removing stale sandbox " + cgroup_root + "/" + entry);
    }
  }
  if (!first.ok()) return first;
  return removed;
}

}  // namespace star::local
