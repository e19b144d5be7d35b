#include "local/real_host.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "local/netns_util.h"
#include "star/agent/real_node_os.h"

namespace star::local {
namespace {

std::string Errno(int e) { return std::strerror(e); }

bool IsDir(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool HasWord(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  for (std::string w; in >> w;) {
    if (w == word) return true;
  }
  return false;
}

Status WriteText(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::Internal("open " + path + ": " + Errno(errno));
  ssize_t n;
  do n = ::write(fd, text.data(), text.size());
  while (n < 0 && errno == EINTR);
  const int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return Status::Internal("write \"" + text + "\" to " + path + ": " + Errno(n < 0 ? e : EIO));
  }
  return Status::Ok();
}

Status MakeDir(const std::string& path, bool existing_ok) {
  if (::mkdir(path.c_str(), 0755) == 0) return Status::Ok();
  const int e = errno;
  if (e == EEXIST && existing_ok && IsDir(path)) return Status::Ok();
  if (e == EEXIST) return Status::AlreadyExists("mkdir " + path + ": " + Errno(e));
  if (e == EACCES || e == EPERM || e == EROFS) {
    return Status::FailedPrecondition("mkdir " + path + ": " + Errno(e) + " (needs root)");
  }
  return Status::Internal("mkdir " + path + ": " + Errno(e));
}

// The netem part of SetDelay: replaces the root qdisc of `ifname` in `ns` with netem.
Status ReplaceNetem(const std::string& ns, const std::string& ifname, long long us) {
  const std::vector<std::string> cmd = {"tc",  "-n",   ns,      "qdisc", "replace", "dev",
                                        ifname, "root", "netem", "delay", std::to_string(us) + "us"};
  STAR_ASSIGN_OR_RETURN(CommandResult r, RunCommand(cmd));
  if (r.exit_code == 0) return Status::Ok();
  std::string err = r.err;
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  const std::string msg =
      "`" + FormatCommand(cmd) + "` failed (exit " + std::to_string(r.exit_code) + "): " + err;
  if (err.find("qdisc kind is unknown") != std::string::npos) {
    return Status::Unavailable(msg + " (the kernel has no netem qdisc: CONFIG_NET_SCH_NETEM)");
  }
  return Status::Internal(msg);
}

// Removes the root qdisc of `ifname` in `ns`; OK when only the default one is there.
Status RemoveNetem(const std::string& ns, const std::string& ifname) {
  STAR_ASSIGN_OR_RETURN(CommandResult del,
                        RunCommand({"tc", "-n", ns, "qdisc", "del", "dev", ifname, "root"}));
  if (del.exit_code == 0) return Status::Ok();
  // Nothing to delete (the default qdisc) is fine; anything else left as netem is not.
  STAR_ASSIGN_OR_RETURN(CommandResult show,
                        RunCommand({"tc", "-n", ns, "qdisc", "show", "dev", ifname}));
  if (show.exit_code == 0 && show.out.find("netem") == std::string::npos) return Status::Ok();
  return Status::Internal("removing netem: " + del.err);
}

// tc in namespace `ns` on `ifname`: `tc -n NS WHAT VERB dev IFNAME ARGS...`.
std::vector<std::string> Tc(const std::string& ns, const std::string& what, const std::string& verb,
                            const std::string& ifname, std::vector<std::string> args) {
  std::vector<std::string> argv = {"tc", "-n", ns, what, verb, "dev", ifname};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// The uplink of SetUplinkShare, built afresh: root HTB 1: (default class 1:10, the slot's
// own traffic), 1:1 the link, 1:10 the rest of it, 1:20 the co-located sender's share
// (none without a sender).
Status ReplaceUplinkShare(const std::string& ns, const std::string& ifname, const UplinkShare& u) {
  (void)RunCommand(Tc(ns, "qdisc", "del", ifname, {"root"}));  // none there is fine
  auto bit = [](int64_t bps) { return std::to_string(bps) + "bit"; };
  const std::string link = bit(u.link_bps);
  STAR_RETURN_IF_ERROR(RunChecked(Tc(ns, "qdisc", "add", ifname, {"root", "handle", "1:", "htb", "default", "10"})));
  STAR_RETURN_IF_ERROR(RunChecked(
      Tc(ns, "class", "add", ifname, {"parent", "1:", "classid", "1:1", "htb", "rate", link, "ceil", link})));
  STAR_RETURN_IF_ERROR(RunChecked(Tc(ns, "class", "add", ifname,
                                     {"parent", "1:1", "classid", "1:10", "htb", "rate",
                                      bit(u.link_bps - u.neighbor_bps), "ceil", link})));
  if (u.neighbor_bps == 0) return Status::Ok();
  STAR_RETURN_IF_ERROR(RunChecked(Tc(ns, "class", "add", ifname,
                                     {"parent", "1:1", "classid", "1:20", "htb", "rate",
                                      bit(u.neighbor_bps), "ceil", bit(u.neighbor_bps)})));
  return RunChecked(Tc(ns, "filter", "add", ifname,
                       {"parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "dst",
                        u.neighbor_address + "/32", "flowid", "1:20"}));
}

// Removes the root qdisc of `ifname` in `ns`; OK when only the default one is there.
Status RemoveRootQdisc(const std::string& ns, const std::string& ifname) {
  STAR_ASSIGN_OR_RETURN(CommandResult del, RunCommand(Tc(ns, "qdisc", "del", ifname, {"root"})));
  if (del.exit_code == 0) return Status::Ok();
  STAR_ASSIGN_OR_RETURN(CommandResult show, RunCommand(Tc(ns, "qdisc", "show", ifname, {})));
  if (show.exit_code == 0 && show.out.find("htb") == std::string::npos) return Status::Ok();
  return Status::Internal("removing the uplink's qdisc: " + del.err);
}

// `ip` run in namespace `ns` ("" = the root one).
std::vector<std::string> Ip(const std::string& ns, std::vector<std::string> args) {
  std::vector<std::string> argv = {"ip"};
  if (!ns.empty()) argv.insert(argv.end(), {"-n", ns});
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

class RealHost final : public Host {
 public:
  RealHost(CgroupLayout layout, std::unique_ptr<agent::NodeOs> os)
      : layout_(std::move(layout)), os_(std::move(os)) {}

  agent::CgroupVersion cgroup_version() const override { return layout_.version; }

  Status CreateCgroup(const std::string& cgroup, bool existing_ok) override {
    STAR_RETURN_IF_ERROR(CheckCgroupPath(cgroup));
    for (const std::string& mnt : layout_.mounts) {
      if (layout_.version == agent::CgroupVersion::kV2) {
        STAR_RETURN_IF_ERROR(EnableCpuBelow(mnt, ParentCgroup(cgroup)));
      }
      STAR_RETURN_IF_ERROR(MakeDir(mnt + "/" + cgroup, existing_ok));
    }
    return Status::Ok();
  }

  bool CgroupExists(const std::string& cgroup) override {
    return CheckCgroupPath(cgroup).ok() && IsDir(layout_.mounts[0] + "/" + cgroup);
  }

  std::vector<std::string> ChildCgroups(const std::string& cgroup) override;
  std::vector<pid_t> CgroupProcesses(const std::string& cgroup) override;

  Status MoveProcess(const std::string& cgroup, pid_t pid) override {
    STAR_RETURN_IF_ERROR(CheckCgroupPath(cgroup));
    for (const std::string& mnt : layout_.mounts) {
      if (!IsDir(mnt + "/" + cgroup)) return Status::NotFound(mnt + "/" + cgroup + " does not exist");
      STAR_RETURN_IF_ERROR(WriteText(mnt + "/" + cgroup + "/cgroup.procs", std::to_string(pid)));
    }
    return Status::Ok();
  }

  Status RemoveCgroup(const std::string& cgroup) override {
    STAR_RETURN_IF_ERROR(CheckCgroupPath(cgroup));
    Status first;
    for (const std::string& mnt : layout_.mounts) {
      const std::string d = mnt + "/" + cgroup;
      if (::rmdir(d.c_str()) != 0 && errno != ENOENT && first.ok()) {
        first = Status::Internal("rmdir " + d + ": " + Errno(errno));
      }
    }
    return first;
  }

  Status WriteCpu(const std::string& cgroup, const agent::CpuLimits& limits) override {
    return os_->WriteCpu(cgroup, limits);
  }
  void Kill(pid_t pid) override { ::kill(pid, SIGKILL); }

  std::vector<std::string> Links() override { return ListLinks(); }
  bool LinkExists(const std::string& ifname) override { return local::LinkExists(ifname); }
  Status DeleteLink(const std::string& ifname) override {
    return RunChecked({"ip", "link", "del", ifname});
  }
  std::vector<std::string> Namespaces() override { return ListNetns(); }
  Status CreateNamespace(const std::string& ns) override {
    return RunChecked({"ip", "netns", "add", ns});
  }
  Status DeleteNamespace(const std::string& ns) override {
    return RunChecked({"ip", "netns", "del", ns});
  }
  std::string NamespacePath(const std::string& ns) const override { return NetnsPath(ns); }
  Status CreateBridge(const std::string& bridge) override {
    STAR_RETURN_IF_ERROR(RunChecked({"ip", "link", "add", bridge, "type", "bridge"}));
    return RunChecked({"ip", "link", "set", bridge, "up"});
  }
  Status CreateVeth(const std::string& host_ifname, const std::string& bridge,
                    const std::string& ns, const std::string& peer) override {
    STAR_RETURN_IF_ERROR(RunChecked(
        {"ip", "link", "add", host_ifname, "type", "veth", "peer", "name", peer, "netns", ns}));
    return RunChecked({"ip", "link", "set", "dev", host_ifname, "master", bridge, "up"});
  }
  StatusOr<std::vector<InterfaceAddress>> Addresses() override;
  Status AddAddress(const std::string& ns, const std::string& ifname,
                    const std::string& cidr) override {
    return RunChecked(Ip(ns, {"addr", "add", cidr, "dev", ifname}));
  }
  Status DeleteAddress(const std::string& ns, const std::string& ifname,
                       const std::string& cidr) override {
    return RunChecked(Ip(ns, {"addr", "del", cidr, "dev", ifname}));
  }
  Status BringUp(const std::string& ns, const std::string& ifname,
                 const std::string& gateway) override {
    STAR_RETURN_IF_ERROR(RunChecked(Ip(ns, {"link", "set", ifname, "up"})));
    STAR_RETURN_IF_ERROR(RunChecked(Ip(ns, {"link", "set", "lo", "up"})));
    return RunChecked(Ip(ns, {"route", "add", "default", "via", gateway}));
  }
  Status WriteNet(const std::string& ifname, const agent::NetLimits& limits) override {
    return os_->WriteNet(ifname, limits);
  }
  Status SetDelay(const std::string& ns, const std::string& ifname, double seconds) override {
    const long long us = std::llround(seconds * 1e6);
    return us == 0 ? RemoveNetem(ns, ifname) : ReplaceNetem(ns, ifname, us);
  }
  Status SetUplinkShare(const std::string& ns, const std::string& ifname,
                        const UplinkShare& share) override {
    if (share.link_bps == 0) return RemoveRootQdisc(ns, ifname);
    return ReplaceUplinkShare(ns, ifname, share);
  }

 private:
  // v2: enables the cpu controller for the children of `cgroup` ("" = the root) when
  // its cgroup.subtree_control lacks it.
  Status EnableCpuBelow(const std::string& mnt, const std::string& cgroup) {
    const std::string file = mnt + (cgroup.empty() ? "" : "/" + cgroup) + "/cgroup.subtree_control";
    if (HasWord(ReadFile(file), "cpu")) return Status::Ok();
    return WriteText(file, "+cpu");
  }

  const CgroupLayout layout_;
  const std::unique_ptr<agent::NodeOs> os_;
};

std::vector<std::string> RealHost::ChildCgroups(const std::string& cgroup) {
  std::vector<std::string> out;
  if (!CheckCgroupPath(cgroup).ok()) return out;
  for (const std::string& mnt : layout_.mounts) {
    const std::string path = mnt + "/" + cgroup;
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) continue;
    while (const dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      if (name != "." && name != ".." && IsDir(path + "/" + name)) out.push_back(name);
    }
    ::closedir(dir);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<pid_t> RealHost::CgroupProcesses(const std::string& cgroup) {
  std::vector<pid_t> out;
  if (!CheckCgroupPath(cgroup).ok()) return out;
  for (const std::string& mnt : layout_.mounts) {
    std::ifstream in(mnt + "/" + cgroup + "/cgroup.procs");
    for (long pid = 0; in >> pid;) out.push_back(static_cast<pid_t>(pid));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

StatusOr<std::vector<InterfaceAddress>> RealHost::Addresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return Status::Internal("getifaddrs: " + Errno(errno));
  std::vector<InterfaceAddress> out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    out.push_back({a->ifa_name != nullptr ? a->ifa_name : "", ntohl(in->sin_addr.s_addr)});
  }
  ::freeifaddrs(list);
  return out;
}

// The v1 mount points of the cpu and cpuacct controllers and the cgroup2 mount point,
// from /proc/mounts.
struct Mounts {
  std::string cpu, cpuacct, unified;
};

Mounts ParseMounts(const std::string& proc_mounts) {
  Mounts m;
  std::istringstream in(proc_mounts);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string dev, dir, type, opts;
    if (!(ls >> dev >> dir >> type >> opts)) continue;
    if (type == "cgroup2" && m.unified.empty()) m.unified = dir;
    if (type != "cgroup") continue;
    std::stringstream os(opts);
    for (std::string opt; std::getline(os, opt, ',');) {
      if (opt == "cpu" && m.cpu.empty()) m.cpu = dir;
      if (opt == "cpuacct" && m.cpuacct.empty()) m.cpuacct = dir;
    }
  }
  return m;
}

}  // namespace

StatusOr<CgroupLayout> ChooseCgroupLayout(
    const std::string& proc_mounts, const std::function<std::string(const std::string&)>& read) {
  const Mounts m = ParseMounts(proc_mounts);
  if (!m.unified.empty() && HasWord(read(m.unified + "/cgroup.controllers"), "cpu")) {
    return CgroupLayout{agent::CgroupVersion::kV2, {m.unified}};
  }
  if (m.cpu.empty()) {
    return Status::FailedPrecondition(
        "no cgroup hierarchy with the cpu controller in /proc/mounts (neither cgroup2 with cpu "
        "nor a cgroup v1 cpu hierarchy)");
  }
  CgroupLayout layout{agent::CgroupVersion::kV1, {m.cpu}};
  if (!m.cpuacct.empty() && m.cpuacct != m.cpu) layout.mounts.push_back(m.cpuacct);
  return layout;
}

StatusOr<CgroupLayout> DetectCgroupLayout() {
  const std::string mounts = ReadFile("/proc/mounts");
  if (mounts.empty()) return Status::FailedPrecondition("cannot read /proc/mounts");
  return ChooseCgroupLayout(mounts, ReadFile);
}

StatusOr<std::unique_ptr<Host>> NewRealHost(const RealHostOptions& options) {
  STAR_RETURN_IF_ERROR(CheckCgroupPath(options.allowed_prefix).WithPrefix("RealHostOptions.allowed_prefix"));
  CgroupLayout layout;
  if (options.layout) {
    layout = *options.layout;
  } else {
    STAR_ASSIGN_OR_RETURN(layout, DetectCgroupLayout());
  }
  if (layout.mounts.empty()) return Status::InvalidArgument("RealHostOptions.layout: no mounts");
  agent::RealNodeOsOptions no;
  no.version = layout.version;
  if (layout.version == agent::CgroupVersion::kV2) no.cgroup_v2_root = layout.mounts[0];
  no.allowed_prefix = options.allowed_prefix;
  STAR_ASSIGN_OR_RETURN(std::unique_ptr<agent::NodeOs> os, agent::NewRealNodeOs(no));
  return std::unique_ptr<Host>(new RealHost(std::move(layout), std::move(os)));
}

}  // namespace star::local
