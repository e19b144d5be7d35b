#include "local/sandbox.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "local/netns_util.h"

namespace star::local {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxSlots = 64;
constexpr size_t kMaxNameLength = 63;
constexpr size_t kMaxNetnsLength = 48;
constexpr auto kKillWait = std::chrono::seconds(5);
constexpr auto kExecWait = std::chrono::seconds(30);
constexpr double kMaxDelaySeconds = 60;
constexpr int kSubnetSecondOctet = 213;  // 10.213.0.0/16

std::string Errno(int e) { return std::strerror(e); }

uint32_t Fnv1a(std::string_view s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

std::string Hex6(std::string_view s) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%06x", Fnv1a(s) & 0xffffffu);
  return buf;
}

// The IFB device RealNodeOs creates for the ingress shaping of `ifname`
// (node-agent/src/os/real_node_os.cc, IfbName: "stbi" + 8 hex digits of FNV-1a). Kept in
// step by hand: the sandbox removes it with the veth it belongs to.
std::string AgentIfbName(const std::string& ifname) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "stbi%08x", Fnv1a(ifname));
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

// ---- Cgroup v1 hierarchies, by direct file I/O. ----

// The distinct mount points of the cpu and cpuacct controllers (cpu first), from
// /proc/mounts. FailedPrecondition when cpu is not mounted as a v1 hierarchy.
StatusOr<std::vector<std::string>> CpuHierarchies() {
  std::ifstream in("/proc/mounts");
  if (!in) return Status::FailedPrecondition("cannot read /proc/mounts: " + Errno(errno));
  std::string line, cpu, cpuacct;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string dev, dir, type, opts;
    if (!(ls >> dev >> dir >> type >> opts) || type != "cgroup") continue;
    std::stringstream os(opts);
    std::string opt;
    while (std::getline(os, opt, ',')) {
      if (opt == "cpu" && cpu.empty()) cpu = dir;
      if (opt == "cpuacct" && cpuacct.empty()) cpuacct = dir;
    }
  }
  if (cpu.empty()) {
    return Status::FailedPrecondition(
        "no cgroup v1 cpu hierarchy in /proc/mounts (the local sandbox needs cgroup v1 cpu)");
  }
  std::vector<std::string> out{cpu};
  if (!cpuacct.empty() && cpuacct != cpu) out.push_back(cpuacct);
  return out;
}

bool IsDir(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> Subdirs(const std::string& path) {
  std::vector<std::string> out;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (IsDir(path + "/" + name)) out.push_back(name);
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

// `path` and every directory below it, children before their parent.
void PostOrder(const std::string& path, std::vector<std::string>* out) {
  for (const std::string& sub : Subdirs(path)) PostOrder(path + "/" + sub, out);
  out->push_back(path);
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

// mkdir -p base/rel (base must exist).
Status MakeDirs(const std::string& base, const std::string& rel) {
  std::string path = base;
  std::stringstream ss(rel);
  std::string part;
  while (std::getline(ss, part, '/')) {
    path += "/" + part;
    STAR_RETURN_IF_ERROR(MakeDir(path, /*existing_ok=*/true));
  }
  return Status::Ok();
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

std::vector<pid_t> ReadPids(const std::string& procs_file) {
  std::vector<pid_t> out;
  std::ifstream in(procs_file);
  long pid = 0;
  while (in >> pid) out.push_back(static_cast<pid_t>(pid));
  return out;
}

// Kills every process in the job's cgroups (in every hierarchy) until they are empty, for
// at most kKillWait. The calling process itself is never killed.
Status KillCgroupProcesses(const std::vector<std::string>& hierarchies, const std::string& job) {
  const auto deadline = Clock::now() + kKillWait;
  const pid_t self = ::getpid();
  for (;;) {
    std::set<pid_t> pids;
    for (const std::string& mnt : hierarchies) {
      if (!IsDir(mnt + "/" + job)) continue;
      std::vector<std::string> dirs;
      PostOrder(mnt + "/" + job, &dirs);
      for (const std::string& d : dirs) {
        for (pid_t p : ReadPids(d + "/cgroup.procs")) {
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
    for (pid_t p : pids) ::kill(p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling an exit, bounded
  }
}

// Removes the job's cgroup directories in every hierarchy, children first; absent is OK.
Status RemoveCgroups(const std::vector<std::string>& hierarchies, const std::string& job) {
  Status first;
  for (const std::string& mnt : hierarchies) {
    if (!IsDir(mnt + "/" + job)) continue;
    std::vector<std::string> dirs;
    PostOrder(mnt + "/" + job, &dirs);
    for (const std::string& d : dirs) {
      if (::rmdir(d.c_str()) != 0 && errno != ENOENT && first.ok()) {
        first = Status::Internal("rmdir " + d + ": " + Errno(errno));
      }
    }
  }
  return first;
}

// ---- Network ----

// Removes every veth (with its agent IFB), namespace and the bridge named after `n`;
// absent ones are fine. Runs `ip` only for what exists.
Status RemoveNetwork(const Names& n) {
  Status first;
  auto keep = [&first](Status s) {
    if (!s.ok() && first.ok()) first = std::move(s);
  };
  const std::string veth_prefix = n.veth_prefix();
  for (const std::string& link : ListLinks()) {
    if (!StartsWith(link, veth_prefix) || !AllDigits(link.substr(veth_prefix.size()))) continue;
    if (const std::string ifb = AgentIfbName(link); LinkExists(ifb)) {
      keep(RunChecked({"ip", "link", "del", ifb}));
    }
    // Deleting the host side takes the namespace side with it, synchronously (a deleted
    // namespace would release its veth only later, asynchronously).
    if (LinkExists(link)) keep(RunChecked({"ip", "link", "del", link}));
  }
  const std::string ns_prefix = n.netns_prefix();
  for (const std::string& ns : ListNetns()) {
    if (StartsWith(ns, ns_prefix) && AllDigits(ns.substr(ns_prefix.size()))) {
      keep(RunChecked({"ip", "netns", "del", ns}));
    }
  }
  if (LinkExists(n.bridge())) keep(RunChecked({"ip", "link", "del", n.bridge()}));
  return first;
}

// Removes everything named after `n`: processes, network, cgroups. The job cgroup is the
// anchor SweepStaleSandboxes finds leftovers by, so it is removed only once the network is
// gone; every other step is tried whatever failed before.
Status RemoveAll(const Names& n, const std::vector<std::string>& hierarchies) {
  Status first = KillCgroupProcesses(hierarchies, n.job_cgroup());
  Status net = RemoveNetwork(n);
  if (!net.ok()) return first.ok() ? net : first;
  Status cg = RemoveCgroups(hierarchies, n.job_cgroup());
  return first.ok() ? cg : first;
}

// The third octets S of every IPv4 address in 10.213.0.0/16 on this namespace's
// interfaces, except those on interface `except`.
StatusOr<std::set<int>> UsedSubnets(const std::string& except) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return Status::Internal("getifaddrs: " + Errno(errno));
  std::set<int> used;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if (a->ifa_name != nullptr && except == a->ifa_name) continue;
    const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
    if ((ip >> 24) == 10 && ((ip >> 16) & 0xff) == kSubnetSecondOctet) {
      used.insert(static_cast<int>((ip >> 8) & 0xff));
    }
  }
  ::freeifaddrs(list);
  return used;
}

std::string Address(int subnet, int host) {
  return "10." + std::to_string(kSubnetSecondOctet) + "." + std::to_string(subnet) + "." +
         std::to_string(host);
}

// Creates the bridge with a free /24 and returns S. Concurrent creators (other `star
// local` processes) are detected after the fact: when another interface holds an
// address in our /24 once ours is up, we give it up and try the next one.
StatusOr<int> CreateBridge(const Names& n) {
  static std::mutex mu;  // sandboxes of this process never race each other for a /24
  std::lock_guard lock(mu);
  const std::string br = n.bridge();
  STAR_RETURN_IF_ERROR(RunChecked({"ip", "link", "add", br, "type", "bridge"}));
  STAR_RETURN_IF_ERROR(RunChecked({"ip", "link", "set", br, "up"}));
  const int start = static_cast<int>(Fnv1a(n.id()) % 256);
  std::set<int> tried;
  for (int k = 0; k < 256; ++k) {
    const int s = (start + k) % 256;
    if (tried.count(s) != 0) continue;
    STAR_ASSIGN_OR_RETURN(std::set<int> used, UsedSubnets(br));
    if (used.count(s) != 0) continue;
    const std::string cidr = Address(s, 1) + "/24";
    STAR_RETURN_IF_ERROR(RunChecked({"ip", "addr", "add", cidr, "dev", br}));
    STAR_ASSIGN_OR_RETURN(std::set<int> after, UsedSubnets(br));
    if (after.count(s) == 0) return s;
    tried.insert(s);  // raced with another sandbox: give this /24 up
    STAR_RETURN_IF_ERROR(RunChecked({"ip", "addr", "del", cidr, "dev", br}));
  }
  return Status::Unavailable("no free /24 in 10.213.0.0/16 for the sandbox bridge " + br);
}

Status CreateSlotNetwork(const Names& n, int subnet, int slot) {
  const std::string ns = n.netns(slot), veth = n.veth(slot);
  STAR_RETURN_IF_ERROR(RunChecked({"ip", "netns", "add", ns}));
  STAR_RETURN_IF_ERROR(
      RunChecked({"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns}));
  STAR_RETURN_IF_ERROR(RunChecked({"ip", "link", "set", "dev", veth, "master", n.bridge(), "up"}));
  STAR_RETURN_IF_ERROR(RunChecked(
      {"ip", "-n", ns, "addr", "add", Address(subnet, slot + 2) + "/24", "dev", "eth0"}));
  STAR_RETURN_IF_ERROR(RunChecked({"ip", "-n", ns, "link", "set", "eth0", "up"}));
  STAR_RETURN_IF_ERROR(RunChecked({"ip", "-n", ns, "link", "set", "lo", "up"}));
  return RunChecked({"ip", "-n", ns, "route", "add", "default", "via", Address(subnet, 1)});
}

// ---- Spawn ----

std::mutex& SpawnMutex() {
  static std::mutex mu;
  return mu;
}

// Moves `fd` to a number >= 3 (so that dup2 onto 0-2 in the child cannot clobber it),
// close-on-exec. Returns the new descriptor (the old one is closed), or -1.
int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

enum ChildStep : int { kStepGo = 1, kStepSetns, kStepStdout, kStepStderr, kStepSetpgid, kStepExec };

const char* StepName(int step) {
  switch (step) {
    case kStepGo: return "wait for the cgroup attach";
    case kStepSetns: return "setns";
    case kStepStdout: return "dup2 stdout";
    case kStepStderr: return "dup2 stderr";
    case kStepSetpgid: return "setpgid";
    case kStepExec: return "exec";
    default: return "child setup";
  }
}

struct ChildArgs {
  int go_fd;     // read end: one byte once the parent has attached the cgroup
  int report_fd; // write end, close-on-exec: {step, errno} on failure
  int ns_fd;     // namespace to enter, or -1
  int out_fd;
  int err_fd;
  char* const* argv;
  char* const* envp;
};

[[noreturn]] void ChildFail(int report_fd, int step) {
  const int msg[2] = {step, errno};
  const ssize_t w = ::write(report_fd, msg, sizeof(msg));
  (void)w;
  ::_exit(127);
}

// Runs in the forked child: async-signal-safe calls only.
[[noreturn]] void ChildMain(const ChildArgs& a) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // KILL/STOP: EINVAL
  char byte = 0;
  ssize_t r;
  do r = ::read(a.go_fd, &byte, 1);
  while (r < 0 && errno == EINTR);
  if (r != 1) ::_exit(127);  // the parent gave up (attach failed): it kills and reaps us
  if (a.ns_fd >= 0 && ::setns(a.ns_fd, CLONE_NEWNET) != 0) ChildFail(a.report_fd, kStepSetns);
  int out = a.out_fd, err = a.err_fd;
  if (err == 1 && out >= 0 && out != 1) {  // keep stderr's target alive across dup2(out, 1)
    err = ::fcntl(err, F_DUPFD_CLOEXEC, 3);
    if (err < 0) ChildFail(a.report_fd, kStepStderr);
  }
  if (out >= 0) {
    if (out != 1 && ::dup2(out, 1) < 0) ChildFail(a.report_fd, kStepStdout);
    if (out == 1 && ::fcntl(1, F_SETFD, 0) != 0) ChildFail(a.report_fd, kStepStdout);
  }
  if (err >= 0) {
    if (err != 2 && ::dup2(err, 2) < 0) ChildFail(a.report_fd, kStepStderr);
    if (err == 2 && ::fcntl(2, F_SETFD, 0) != 0) ChildFail(a.report_fd, kStepStderr);
  }
  if (::setpgid(0, 0) != 0) ChildFail(a.report_fd, kStepSetpgid);
  // Everything but 0-2 and the report pipe (close-on-exec) goes now.
  const unsigned rep = static_cast<unsigned>(a.report_fd);
  if (rep > 3) ::close_range(3, rep - 1, 0);
  ::close_range(rep + 1, ~0U, 0);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execvpe(a.argv[0], a.argv, a.envp);
  ChildFail(a.report_fd, kStepExec);
}

}  // namespace

// ---- Sandbox ----

StatusOr<std::unique_ptr<Sandbox>> Sandbox::Create(const SandboxOptions& options) {
  STAR_RETURN_IF_ERROR(CheckName(options.name));
  if (options.slots < 1 || options.slots > kMaxSlots) {
    return Status::InvalidArgument("SandboxOptions.slots: must be in 1..64, got " +
                                   std::to_string(options.slots));
  }
  STAR_RETURN_IF_ERROR(CheckCgroupRoot(options.cgroup_root).WithPrefix("SandboxOptions"));
  if (options.network && ::geteuid() != 0) {
    return Status::FailedPrecondition(
        "SandboxOptions.network: network namespaces need root (or set network = false)");
  }
  if (options.network) {
    if (auto ip = FindProgram("ip"); !ip.ok()) {
      return Status::FailedPrecondition("SandboxOptions.network: needs iproute2's `ip`: " +
                                        ip.status().message());
    }
  }
  STAR_ASSIGN_OR_RETURN(std::vector<std::string> hierarchies, CpuHierarchies());
  if (!Reserve(options.name)) {
    return Status::AlreadyExists("sandbox \"" + options.name + "\" already exists in this process");
  }

  std::unique_ptr<Sandbox> sb(new Sandbox());
  sb->name_ = options.name;
  sb->cgroup_root_ = options.cgroup_root;
  sb->owner_ = ::getpid();
  sb->slots_ = options.slots;
  sb->network_ = options.network;
  sb->hierarchies_ = hierarchies;
  const Names n{options.cgroup_root, options.name, sb->owner_};

  auto fail = [&](Status st) -> Status {
    if (Status undo = RemoveAll(n, hierarchies); !undo.ok()) {
      std::cerr << "star local: sandbox " << options.name << ": cleanup after a failed create: "
                << undo << "\n";
    }
    sb->torn_down_ = true;  // the destructor has nothing left to do
    Release(options.name);
    return st;
  };

  // A previous process with our pid (or an earlier sandbox of ours whose teardown failed)
  // may have left resources with exactly our names: nobody alive owns them.
  // (Cheap when there are none: nothing but directory listings.)
  if (Status st = RemoveAll(n, hierarchies); !st.ok()) {
    return fail(st.WithPrefix("removing leftovers of an earlier " + n.id()));
  }

  std::vector<std::string> cgroups = {n.job_cgroup(), n.job_cgroup() + "/eval"};
  for (int i = 0; i < options.slots; ++i) {
    const std::string slot = n.job_cgroup() + "/slot" + std::to_string(i);
    cgroups.insert(cgroups.end(), {slot, slot + "/main", slot + "/neighbor"});
  }
  for (const std::string& mnt : hierarchies) {
    if (Status st = MakeDirs(mnt, options.cgroup_root); !st.ok()) return fail(st);
    for (const std::string& cg : cgroups) {
      if (Status st = MakeDir(mnt + "/" + cg, /*existing_ok=*/false); !st.ok()) return fail(st);
    }
  }

  if (options.network) {
    auto subnet = CreateBridge(n);
    if (!subnet.ok()) return fail(subnet.status().WithPrefix("sandbox network"));
    sb->subnet_ = *subnet;
    for (int i = 0; i < options.slots; ++i) {
      if (Status st = CreateSlotNetwork(n, sb->subnet_, i); !st.ok()) {
        return fail(st.WithPrefix("sandbox network, slot " + std::to_string(i)));
      }
    }
  }
  return sb;
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
  Status st = RemoveAll(Names{cgroup_root_, name_, owner_}, hierarchies_);
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
  const std::string ns = netns(slot);
  const long long us = std::llround(seconds * 1e6);
  if (us == 0) {
    STAR_ASSIGN_OR_RETURN(CommandResult del,
                          RunCommand({"tc", "-n", ns, "qdisc", "del", "dev", "eth0", "root"}));
    if (del.exit_code == 0) return Status::Ok();
    // Nothing to delete (the default qdisc) is fine; anything else left as netem is not.
    STAR_ASSIGN_OR_RETURN(CommandResult show,
                          RunCommand({"tc", "-n", ns, "qdisc", "show", "dev", "eth0"}));
    if (show.exit_code == 0 && show.out.find("netem") == std::string::npos) return Status::Ok();
    return Status::Internal("SetDelay: slot " + std::to_string(slot) + ": removing netem: " +
                            del.err);
  }
  const std::vector<std::string> cmd = {"tc", "-n",  ns,      "qdisc", "replace",
                                        "dev", "eth0", "root", "netem", "delay",
                                        std::to_string(us) + "us"};
  STAR_ASSIGN_OR_RETURN(CommandResult r, RunCommand(cmd));
  if (r.exit_code == 0) return Status::Ok();
  std::string err = r.err;
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  const std::string msg = "SetDelay: slot " + std::to_string(slot) + ": `" + FormatCommand(cmd) +
                          "` failed (exit " + std::to_string(r.exit_code) + "): " + err;
  if (err.find("qdisc kind is unknown") != std::string::npos) {
    return Status::Unavailable(msg + " (the kernel has no netem qdisc: CONFIG_NET_SCH_NETEM)");
  }
  return Status::Internal(msg);
}

StatusOr<pid_t> Sandbox::Spawn(const SpawnSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return Status::InvalidArgument("Spawn: argv: must name a program");
  }
  const std::string job = job_cgroup();
  if (!spec.cgroup.empty() && spec.cgroup != job && !StartsWith(spec.cgroup, job + "/")) {
    return Status::InvalidArgument("Spawn: cgroup: must be " + job + " or below it, got \"" +
                                   spec.cgroup + "\"");
  }
  if (spec.cgroup.find("..") != std::string::npos) {
    return Status::InvalidArgument("Spawn: cgroup: \"..\" is not allowed, got \"" + spec.cgroup +
                                   "\"");
  }
  if (spec.netns_slot < -1 || spec.netns_slot >= slots_) {
    return Status::InvalidArgument("Spawn: netns_slot: must be -1 or in [0, " +
                                   std::to_string(slots_) + "), got " +
                                   std::to_string(spec.netns_slot));
  }
  if (spec.netns_slot >= 0 && !network_) {
    return Status::FailedPrecondition("Spawn: netns_slot " + std::to_string(spec.netns_slot) +
                                      ": the sandbox has no network namespaces");
  }
  {
    std::lock_guard lock(mu_);
    if (torn_down_) return Status::FailedPrecondition("Spawn: the sandbox was torn down");
  }
  if (!spec.cgroup.empty()) {
    for (const std::string& mnt : hierarchies_) {
      if (!IsDir(mnt + "/" + spec.cgroup)) {
        return Status::InvalidArgument("Spawn: cgroup: " + mnt + "/" + spec.cgroup +
                                       " does not exist");
      }
    }
  }

  // Everything the child needs is prepared here: it may only make async-signal-safe calls.
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // One spawn at a time: a concurrent fork would inherit our pipes and delay the EOF
  // that says "exec succeeded".
  std::lock_guard spawn_lock(SpawnMutex());
  int ns_fd = -1;
  if (spec.netns_slot >= 0) {
    const std::string path = NetnsPath(netns(spec.netns_slot));
    ns_fd = AboveStdio(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (ns_fd < 0) return Status::Internal("Spawn: open " + path + ": " + Errno(errno));
  }
  int go[2] = {-1, -1}, report[2] = {-1, -1};
  auto close_all = [&] {
    for (int* fd : {&ns_fd, &go[0], &go[1], &report[0], &report[1]}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  };
  if (::pipe2(go, O_CLOEXEC) != 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    close_all();
    return Status::Internal("Spawn: pipe: " + Errno(e));
  }
  for (int* fd : {&go[0], &go[1], &report[0], &report[1]}) *fd = AboveStdio(*fd);
  if (go[0] < 0 || go[1] < 0 || report[0] < 0 || report[1] < 0) {
    const int e = errno;
    close_all();
    return Status::Internal("Spawn: fcntl: " + Errno(e));
  }

  const ChildArgs args{go[0], report[1], ns_fd, spec.stdout_fd, spec.stderr_fd, argv.data(),
                       envp.data()};
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);  // no handler of ours may run in the child
  const pid_t pid = ::fork();
  if (pid == 0) ChildMain(args);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  for (int* fd : {&ns_fd, &go[0], &report[1]}) {
    ::close(*fd);
    *fd = -1;
  }
  if (pid < 0) {
    close_all();
    return Status::Internal("Spawn: fork: " + Errno(fork_errno));
  }
  auto kill_and_reap = [&] {
    close_all();
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  };
  (void)::setpgid(pid, pid);  // also done by the child; here too so no signal races it

  if (!spec.cgroup.empty()) {
    for (const std::string& mnt : hierarchies_) {
      if (Status st = WriteText(mnt + "/" + spec.cgroup + "/cgroup.procs", std::to_string(pid));
          !st.ok()) {
        kill_and_reap();
        return st.WithPrefix("Spawn: attach to cgroup");
      }
    }
  }
  const char go_byte = 'g';
  ssize_t w;
  do w = ::write(go[1], &go_byte, 1);
  while (w < 0 && errno == EINTR);
  ::close(go[1]);
  go[1] = -1;

  // EOF on the report pipe: exec succeeded (close-on-exec). {step, errno}: it failed.
  int msg[2] = {0, 0};
  size_t got = 0;
  const auto deadline = Clock::now() + kExecWait;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      kill_and_reap();
      return Status::DeadlineExceeded("Spawn: " + spec.argv[0] + ": did not exec within " +
                                      std::to_string(kExecWait.count()) + " s");
    }
    pollfd p{report[0], POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) continue;
    if (n < 0) {
      const int e = errno;
      kill_and_reap();
      return Status::Internal("Spawn: poll: " + Errno(e));
    }
    const ssize_t r = ::read(report[0], reinterpret_cast<char*>(msg) + got, sizeof(msg) - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
    if (got == sizeof(msg)) break;
  }
  close_all();
  if (got == 0) return pid;  // exec'd

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != sizeof(msg)) {
    return Status::Internal("Spawn: " + spec.argv[0] + ": the child failed before exec");
  }
  const std::string what =
      std::string(StepName(msg[0])) + " " + spec.argv[0] + ": " + Errno(msg[1]);
  if (msg[0] == kStepExec && msg[1] == ENOENT) return Status::NotFound(what);
  return Status::Internal(what);
}

// ---- Sweep ----

StatusOr<int> SweepStaleSandboxes(const std::string& cgroup_root) {
  STAR_RETURN_IF_ERROR(CheckCgroupRoot(cgroup_root).WithPrefix("SweepStaleSandboxes"));
  STAR_ASSIGN_OR_RETURN(std::vector<std::string> hierarchies, CpuHierarchies());
  std::set<std::string> entries;
  for (const std::string& mnt : hierarchies) {
    for (const std::string& d : Subdirs(mnt + "/" + cgroup_root)) entries.insert(d);
  }
  int removed = 0;
  Status first;
  for (const std::string& entry : entries) {
    const size_t dash = entry.rfind('-');
    if (dash == std::string::npos || !AllDigits(entry.substr(dash + 1))) continue;
    const std::string name = entry.substr(0, dash);
    if (!CheckName(name).ok() || entry.size() - dash - 1 > 9) continue;
    const auto pid = static_cast<pid_t>(std::stol(entry.substr(dash + 1)));
    if (pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno == EPERM) continue;  // the owner is alive
    const Status st = RemoveAll(Names{cgroup_root, name, pid}, hierarchies);
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
