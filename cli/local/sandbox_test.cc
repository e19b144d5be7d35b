// Sandbox on the real kernel (needs root; the network tests also need `ip netns`): cgroups
// in cpu and cpuacct, processes started inside them and inside a slot's namespace, slots
// reaching each other and the host over the bridge, netem on the namespace side,
// teardown killing and removing everything, and the sweep of a dead owner's leftovers.
// Each test uses its own parent cgroup "star-test-<pid>-<n>", removed when it ends; every
// process a test starts is killed and reaped by a guard, every sandbox torn down by its
// destructor.
#include "local/sandbox.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "local/netns_util.h"
#include "star/agent/real_node_os.h"

namespace star::local {
namespace {

constexpr int kIoTimeoutMs = 10000;

// A started process, killed (if still running) and reaped when the guard goes.
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid = -1) : pid_(pid) {}
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  ~ChildGuard() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  // Waits for the process (blocking) and returns its wait status.
  int Wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

// A descriptor closed when the guard goes.
class FdGuard {
 public:
  explicit FdGuard(int fd = -1) : fd_(fd) {}
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  ~FdGuard() { Close(); }
  int get() const { return fd_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Controller -> mount point of the v1 hierarchies, read independently of the sandbox.
std::map<std::string, std::string> CgroupMounts() {
  std::map<std::string, std::string> out;
  std::ifstream in("/proc/mounts");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string dev, dir, type, opts;
    if (!(ls >> dev >> dir >> type >> opts) || type != "cgroup") continue;
    std::stringstream os(opts);
    std::string opt;
    while (std::getline(os, opt, ',')) {
      if (opt == "cpu" || opt == "cpuacct") out.emplace(opt, dir);
    }
  }
  return out;
}

bool IsDir(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool CgroupExists(const std::string& controller, const std::string& cgroup) {
  auto mounts = CgroupMounts();
  return mounts.count(controller) != 0 && IsDir(mounts[controller] + "/" + cgroup);
}

// Why network tests cannot run here, or "" when `ip netns` works.
std::string NetnsUnavailableReason() {
  const std::string ns = "star-probe-" + std::to_string(::getpid());
  auto add = RunCommand({"ip", "netns", "add", ns});
  if (!add.ok()) return add.status().ToString();
  if (add->exit_code != 0) return "`ip netns add` failed: " + add->err;
  (void)RunCommand({"ip", "netns", "del", ns});
  return "";
}

// Whether this kernel has the netem qdisc (probed in a throwaway namespace).
bool NetemSupported() {
  const std::string ns = "star-netem-probe-" + std::to_string(::getpid());
  auto add = RunCommand({"ip", "netns", "add", ns});
  if (!add.ok() || add->exit_code != 0) return false;
  auto tc =
      RunCommand({"tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"});
  (void)RunCommand({"ip", "netns", "del", ns});
  return tc.ok() && tc->exit_code == 0;
}

// Reads from `fd` until `sentinel` has been seen, EOF, or kIoTimeoutMs without data.
std::string ReadUntil(int fd, const std::string& sentinel) {
  std::string out;
  char buf[1024];
  for (int rounds = 0; rounds < 1000 && out.find(sentinel) == std::string::npos; ++rounds) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kIoTimeoutMs) != 1) break;
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// A listening TCP socket bound to addr:<ephemeral> inside network namespace `ns` (""
// = this one). The socket stays in that namespace; the calling thread does not move.
struct Listener {
  int fd = -1;
  int port = 0;
  std::string error;
};
Listener ListenIn(const std::string& ns, const std::string& addr) {
  Listener l;
  std::thread t([&] {
    if (!ns.empty()) {
      FdGuard nsfd(::open(NetnsPath(ns).c_str(), O_RDONLY | O_CLOEXEC));
      if (nsfd.get() < 0 || ::setns(nsfd.get(), CLONE_NEWNET) != 0) {
        l.error = "enter " + ns + ": " + std::strerror(errno);
        return;
      }
    }
    l.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = 0;
    socklen_t len = sizeof(a);
    if (l.fd < 0 || ::inet_pton(AF_INET, addr.c_str(), &a.sin_addr) != 1 ||
        ::bind(l.fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(l.fd, 4) != 0 ||
        ::getsockname(l.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      l.error = "listen on " + addr + " in " + ns + ": " + std::strerror(errno);
      return;
    }
    l.port = ntohs(a.sin_port);
  });
  t.join();
  return l;
}

// Accepts one connection on `listen_fd` and returns what it sends up to EOF or newline;
// "" when nobody connects within kIoTimeoutMs.
std::string AcceptLine(int listen_fd) {
  pollfd p{listen_fd, POLLIN, 0};
  if (::poll(&p, 1, kIoTimeoutMs) != 1) return "";
  FdGuard c(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
  if (c.get() < 0) return "";
  return ReadUntil(c.get(), "\n");
}

std::vector<std::string> TestEnv() { return {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}; }

// Every OS name one sandbox owns, captured while it is alive.
struct OwnedNames {
  std::string job_cgroup, bridge;
  std::vector<std::string> veths, namespaces;
};
OwnedNames NamesOf(const Sandbox& sb) {
  OwnedNames n{sb.job_cgroup(), sb.bridge_ifname(), {}, {}};
  for (int i = 0; i < sb.slots(); ++i) {
    if (!sb.host_ifname(i).empty()) n.veths.push_back(sb.host_ifname(i));
    if (!sb.netns(i).empty()) n.namespaces.push_back(sb.netns(i));
  }
  return n;
}

void ExpectAllExist(const OwnedNames& n) {
  EXPECT_TRUE(CgroupExists("cpu", n.job_cgroup)) << n.job_cgroup;
  EXPECT_TRUE(CgroupExists("cpuacct", n.job_cgroup)) << n.job_cgroup;
  EXPECT_TRUE(n.bridge.empty() || LinkExists(n.bridge)) << n.bridge;
  for (const std::string& v : n.veths) EXPECT_TRUE(LinkExists(v)) << v;
  for (const std::string& ns : n.namespaces) EXPECT_TRUE(NetnsExists(ns)) << ns;
}

void ExpectAllGone(const OwnedNames& n) {
  EXPECT_FALSE(CgroupExists("cpu", n.job_cgroup)) << n.job_cgroup;
  EXPECT_FALSE(CgroupExists("cpuacct", n.job_cgroup)) << n.job_cgroup;
  EXPECT_FALSE(!n.bridge.empty() && LinkExists(n.bridge)) << n.bridge;
  for (const std::string& v : n.veths) EXPECT_FALSE(LinkExists(v)) << v;
  for (const std::string& ns : n.namespaces) EXPECT_FALSE(NetnsExists(ns)) << ns;
}

// Skips the current test when `ip netns` does not work here.
#define SKIP_WITHOUT_NETNS()                                                  \
  do {                                                                        \
    if (const std::string why = NetnsUnavailableReason(); !why.empty()) {     \
      GTEST_SKIP() << "network namespaces unavailable: " << why;              \
    }                                                                         \
  } while (0)

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups, network namespaces)";
    static int counter = 0;
    root_ = "star-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
  }
  // The parent cgroup must be empty by now (every sandbox removed its job cgroup).
  void TearDown() override {
    if (root_.empty()) return;
    for (const auto& [controller, mount] : CgroupMounts()) {
      const std::string dir = mount + "/" + root_;
      if (!IsDir(dir)) continue;
      EXPECT_EQ(::rmdir(dir.c_str()), 0) << dir << ": " << std::strerror(errno);
    }
  }
  SandboxOptions Options(const std::string& name, int slots, bool network) const {
    SandboxOptions o;
    o.name = name;
    o.slots = slots;
    o.network = network;
    o.cgroup_root = root_;
    return o;
  }

  std::string root_;
};

TEST(SandboxOptionsTest, BadOptionsAreRejectedNamingTheField) {
  SandboxOptions o;
  auto code = [&](const SandboxOptions& opts) { return Sandbox::Create(opts).status().code(); };
  auto message = [&](const SandboxOptions& opts) {
    return Sandbox::Create(opts).status().message();
  };
  o.name = "";
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
  EXPECT_NE(message(o).find("name"), std::string::npos) << message(o);
  for (const char* bad : {"bad/name", "-lead", "white space", "dots/../x"}) {
    o.name = bad;
    EXPECT_EQ(code(o), StatusCode::kInvalidArgument) << bad;
  }
  o.name = std::string(64, 'a');
  EXPECT_EQ(code(o), StatusCode::kInvalidArgument);
  o.name = "ok";
  for (int slots : {0, 65, -1}) {
    o.slots = slots;
    EXPECT_EQ(code(o), StatusCode::kInvalidArgument) << slots;
    EXPECT_NE(message(o).find("slots"), std::string::npos) << message(o);
  }
  o.slots = 1;
  for (const char* bad : {"", "/abs", "a/../b", "trailing/", "a//b"}) {
    o.cgroup_root = bad;
    EXPECT_EQ(code(o), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(message(o).find("cgroup_root"), std::string::npos) << message(o);
  }
}

TEST_F(SandboxTest, ThreeSlotsHaveCgroupsInCpuAndCpuacctAndABridgedNetwork) {
  SKIP_WITHOUT_NETNS();
  auto sb = Sandbox::Create(Options("layout", 3, true));
  ASSERT_TRUE(sb.ok()) << sb.status();
  const Sandbox& s = **sb;
  ASSERT_TRUE(s.has_network());
  EXPECT_EQ(s.slots(), 3);
  EXPECT_EQ(s.job_cgroup(), root_ + "/layout-" + std::to_string(::getpid()));
  std::vector<std::string> cgroups = {s.job_cgroup(), s.eval_cgroup()};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.slot_cgroup(i), s.job_cgroup() + "/slot" + std::to_string(i));
    cgroups.insert(cgroups.end(), {s.slot_cgroup(i), s.main_cgroup(i), s.neighbor_cgroup(i)});
  }
  for (const std::string& cg : cgroups) {
    EXPECT_TRUE(CgroupExists("cpu", cg)) << cg;
    EXPECT_TRUE(CgroupExists("cpuacct", cg)) << cg;
  }
  EXPECT_EQ(s.slot_cgroup(3), "");

  const std::string host = s.host_address();
  ASSERT_EQ(host.rfind("10.213.", 0), 0u) << host;
  ASSERT_EQ(host.substr(host.size() - 2), ".1") << host;
  const std::string net = host.substr(0, host.size() - 1);  // "10.213.S."
  const std::string bridge = s.bridge_ifname();
  EXPECT_TRUE(LinkExists(bridge)) << bridge;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.slot_address(i), net + std::to_string(i + 2));
    const std::string veth = s.host_ifname(i);
    EXPECT_LE(veth.size(), 15u) << veth;
    EXPECT_TRUE(LinkExists(veth)) << veth;
    char target[PATH_MAX] = {};
    const ssize_t n = ::readlink(("/sys/class/net/" + veth + "/master").c_str(), target,
                                 sizeof(target) - 1);
    ASSERT_GT(n, 0) << veth << " is not a bridge port";
    const std::string master(target, static_cast<size_t>(n));
    EXPECT_EQ(master.substr(master.rfind('/') + 1), bridge) << veth;
    EXPECT_TRUE(NetnsExists(s.netns(i))) << s.netns(i);
    auto route = RunCommand({"ip", "-n", s.netns(i), "route", "show", "default"});
    ASSERT_TRUE(route.ok()) << route.status();
    EXPECT_NE(route->out.find("via " + host), std::string::npos) << route->out;
  }
}

TEST_F(SandboxTest, SpawnedProcessIsInItsCgroupAndItsSlotsNamespace) {
  SKIP_WITHOUT_NETNS();
  auto sb = Sandbox::Create(Options("spawn", 3, true));
  ASSERT_TRUE(sb.ok()) << sb.status();
  Sandbox& s = **sb;
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  FdGuard read_end(p[0]), write_end(p[1]);
  Sandbox::SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "cat /proc/self/cgroup; ip -o -4 addr show eth0; echo END; exec sleep 30"};
  spec.env = TestEnv();
  spec.cgroup = s.main_cgroup(1);
  spec.netns_slot = 1;
  spec.stdout_fd = write_end.get();
  auto pid = s.Spawn(spec);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard child(*pid);
  write_end.Close();
  const std::string out = ReadUntil(read_end.get(), "END\n");
  ASSERT_NE(out.find("END\n"), std::string::npos) << out;

  // v1 lines are "<id>:<controllers>:<path>"; cpu and cpuacct may share one line.
  bool cpu = false, cpuacct = false;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::stringstream controllers(line.substr(a + 1, b - a - 1));
    const std::string path = line.substr(b + 1);
    std::string c;
    while (std::getline(controllers, c, ',')) {
      if (c == "cpu") cpu = path == "/" + s.main_cgroup(1);
      if (c == "cpuacct") cpuacct = path == "/" + s.main_cgroup(1);
    }
  }
  EXPECT_TRUE(cpu) << out;
  EXPECT_TRUE(cpuacct) << out;
  EXPECT_NE(out.find("inet " + s.slot_address(1) + "/24"), std::string::npos) << out;
  EXPECT_EQ(::getpgid(*pid), *pid);  // leads its own process group
}

TEST_F(SandboxTest, SlotsReachEachOtherAndTheHostAddress) {
  SKIP_WITHOUT_NETNS();
  auto sb = Sandbox::Create(Options("reach", 3, true));
  ASSERT_TRUE(sb.ok()) << sb.status();
  Sandbox& s = **sb;
  struct Case {
    int from;
    std::string listen_ns, addr;
  };
  const std::vector<Case> cases = {{0, s.netns(1), s.slot_address(1)},
                                   {2, s.netns(0), s.slot_address(0)},
                                   {1, "", s.host_address()}};
  for (const Case& c : cases) {
    SCOPED_TRACE("slot " + std::to_string(c.from) + " -> " + c.addr);
    Listener l = ListenIn(c.listen_ns, c.addr);
    FdGuard listener(l.fd);
    ASSERT_TRUE(l.error.empty()) << l.error;
    Sandbox::SpawnSpec spec;
    spec.argv = {"bash", "-c",
                 "exec 3<>/dev/tcp/" + c.addr + "/" + std::to_string(l.port) +
                     " && echo hello-from-" + std::to_string(c.from) + " >&3"};
    spec.env = TestEnv();
    spec.cgroup = s.main_cgroup(c.from);
    spec.netns_slot = c.from;
    auto pid = s.Spawn(spec);
    ASSERT_TRUE(pid.ok()) << pid.status();
    ChildGuard child(*pid);
    EXPECT_EQ(AcceptLine(listener.get()), "hello-from-" + std::to_string(c.from) + "\n");
    const int status = child.Wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
}

TEST_F(SandboxTest, SetDelayInstallsNetemOnTheNamespaceSideOrSaysUnavailable) {
  SKIP_WITHOUT_NETNS();
  auto sb = Sandbox::Create(Options("delay", 2, true));
  ASSERT_TRUE(sb.ok()) << sb.status();
  Sandbox& s = **sb;
  EXPECT_EQ(s.SetDelay(2, 0.1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.SetDelay(-1, 0.1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.SetDelay(0, -0.5).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.SetDelay(0, 1e9).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(s.SetDelay(1, 0).ok());  // nothing installed: removing is a no-op

  auto qdiscs = [&](int slot) {
    auto r = RunCommand({"tc", "-n", s.netns(slot), "qdisc", "show", "dev", "eth0"});
    return r.ok() ? r->out : r.status().ToString();
  };
  if (!NetemSupported()) {
    Status st = s.SetDelay(1, 0.05);
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st;
    EXPECT_NE(st.message().find("netem"), std::string::npos) << st;
    EXPECT_EQ(qdiscs(1).find("netem"), std::string::npos);
    GTEST_SKIP() << "this kernel has no netem qdisc; checked only that SetDelay says so";
  }
  ASSERT_TRUE(s.SetDelay(1, 0.05).ok());
  EXPECT_NE(qdiscs(1).find("netem"), std::string::npos) << qdiscs(1);
  EXPECT_NE(qdiscs(1).find("delay 50"), std::string::npos) << qdiscs(1);
  EXPECT_EQ(qdiscs(0).find("netem"), std::string::npos) << qdiscs(0);
  ASSERT_TRUE(s.SetDelay(1, 0.2).ok());  // replaces
  EXPECT_NE(qdiscs(1).find("delay 200"), std::string::npos) << qdiscs(1);
  ASSERT_TRUE(s.SetDelay(1, 0).ok());
  EXPECT_EQ(qdiscs(1).find("netem"), std::string::npos) << qdiscs(1);
  EXPECT_TRUE(s.SetDelay(1, 0).ok());
}

TEST_F(SandboxTest, TeardownKillsProcessesAndRemovesEveryResource) {
  SKIP_WITHOUT_NETNS();
  auto sb = Sandbox::Create(Options("teardown", 3, true));
  ASSERT_TRUE(sb.ok()) << sb.status();
  Sandbox& s = **sb;
  const OwnedNames names = NamesOf(s);
  ASSERT_EQ(names.veths.size(), 3u);
  ASSERT_EQ(names.namespaces.size(), 3u);
  ExpectAllExist(names);

  std::vector<std::unique_ptr<ChildGuard>> children;
  for (const std::string& cg : {s.main_cgroup(0), s.neighbor_cgroup(2), s.eval_cgroup()}) {
    Sandbox::SpawnSpec spec;
    spec.argv = {"sleep", "30"};
    spec.env = TestEnv();
    spec.cgroup = cg;
    spec.netns_slot = cg == s.eval_cgroup() ? -1 : 0;
    auto pid = s.Spawn(spec);
    ASSERT_TRUE(pid.ok()) << pid.status();
    children.push_back(std::make_unique<ChildGuard>(*pid));
  }
  ASSERT_TRUE(s.Teardown().ok());
  for (auto& c : children) {
    const int status = c->Wait();  // Teardown waited for them to leave their cgroups
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  }
  ExpectAllGone(names);
  EXPECT_TRUE(s.Teardown().ok());  // idempotent
  Sandbox::SpawnSpec spec;
  spec.argv = {"true"};
  EXPECT_EQ(s.Spawn(spec).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.SetDelay(0, 0.1).code(), StatusCode::kFailedPrecondition);
}

// Regression guard for the IFB naming rule the sandbox copies from RealNodeOs.
TEST_F(SandboxTest, TeardownRemovesTheIfbDeviceNodeOsMadeForIngressShaping) {
  SKIP_WITHOUT_NETNS();
  auto sb = Sandbox::Create(Options("ifb", 1, true));
  ASSERT_TRUE(sb.ok()) << sb.status();
  Sandbox& s = **sb;
  agent::RealNodeOsOptions oo;
  oo.allowed_prefix = s.job_cgroup();
  auto os = agent::NewRealNodeOs(oo);
  ASSERT_TRUE(os.ok()) << os.status();
  const std::vector<std::string> before = ListLinks();
  agent::NetLimits limits;
  limits.ingress_bits_per_second = 8000000;
  limits.egress_bits_per_second = 8000000;
  ASSERT_TRUE((*os)->WriteNet(s.host_ifname(0), limits).ok());
  std::vector<std::string> added;
  for (const std::string& l : ListLinks()) {
    if (std::find(before.begin(), before.end(), l) == before.end()) added.push_back(l);
  }
  ASSERT_EQ(added.size(), 1u) << "expected one IFB device";
  ASSERT_TRUE(s.Teardown().ok());
  EXPECT_FALSE(LinkExists(added[0])) << added[0];
}

TEST_F(SandboxTest, DestructorRemovesEverything) {
  SKIP_WITHOUT_NETNS();
  OwnedNames names;
  {
    auto sb = Sandbox::Create(Options("dtor", 2, true));
    ASSERT_TRUE(sb.ok()) << sb.status();
    names = NamesOf(**sb);
    ExpectAllExist(names);
  }
  ExpectAllGone(names);
}

TEST_F(SandboxTest, SpawnOfAMissingProgramIsAnErrorNamingIt) {
  auto sb = Sandbox::Create(Options("missing", 1, false));
  ASSERT_TRUE(sb.ok()) << sb.status();
  Sandbox& s = **sb;
  for (const std::string& program : {std::string("/nonexistent/star-no-such-program"),
                                     std::string("star-no-such-program-on-path")}) {
    Sandbox::SpawnSpec spec;
    spec.argv = {program, "--flag"};
    spec.env = TestEnv();
    spec.cgroup = s.main_cgroup(0);
    auto pid = s.Spawn(spec);
    ASSERT_FALSE(pid.ok());
    EXPECT_EQ(pid.status().code(), StatusCode::kNotFound) << pid.status();
    EXPECT_NE(pid.status().message().find("exec " + program), std::string::npos) << pid.status();
    EXPECT_NE(pid.status().message().find("No such file or directory"), std::string::npos)
        << pid.status();
  }
  // Spawn reaped the failed children itself.
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(SandboxTest, SpawnRejectsBadSpecs) {
  auto sb = Sandbox::Create(Options("badspec", 2, false));
  ASSERT_TRUE(sb.ok()) << sb.status();
  Sandbox& s = **sb;
  Sandbox::SpawnSpec spec;
  EXPECT_EQ(s.Spawn(spec).status().code(), StatusCode::kInvalidArgument);  // empty argv
  spec.argv = {"true"};
  spec.cgroup = root_;  // outside the job
  EXPECT_EQ(s.Spawn(spec).status().code(), StatusCode::kInvalidArgument);
  spec.cgroup = s.job_cgroup() + "/../other";
  EXPECT_EQ(s.Spawn(spec).status().code(), StatusCode::kInvalidArgument);
  spec.cgroup = s.job_cgroup() + "/nosuch";
  EXPECT_EQ(s.Spawn(spec).status().code(), StatusCode::kInvalidArgument);
  spec.cgroup = s.main_cgroup(0);
  spec.netns_slot = 2;
  EXPECT_EQ(s.Spawn(spec).status().code(), StatusCode::kInvalidArgument);
  spec.netns_slot = 0;  // no network
  EXPECT_EQ(s.Spawn(spec).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(SandboxTest, WithoutNetworkAddressesAreLoopbackAndDelayIsUnavailable) {
  auto sb = Sandbox::Create(Options("nonet", 2, false));
  ASSERT_TRUE(sb.ok()) << sb.status();
  Sandbox& s = **sb;
  EXPECT_FALSE(s.has_network());
  EXPECT_EQ(s.host_address(), "127.0.0.1");
  EXPECT_EQ(s.slot_address(0), "127.0.0.1");
  EXPECT_EQ(s.slot_address(1), "127.0.0.1");
  EXPECT_EQ(s.host_ifname(0), "");
  EXPECT_EQ(s.bridge_ifname(), "");
  EXPECT_EQ(s.netns(0), "");
  EXPECT_EQ(s.SetDelay(0, 0.1).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(CgroupExists("cpu", s.neighbor_cgroup(1)));
  EXPECT_TRUE(CgroupExists("cpuacct", s.neighbor_cgroup(1)));

  // A process still lands in its cgroup.
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  FdGuard read_end(p[0]), write_end(p[1]);
  Sandbox::SpawnSpec spec;
  spec.argv = {"cat", "/proc/self/cgroup"};
  spec.env = TestEnv();
  spec.cgroup = s.neighbor_cgroup(1);
  spec.stdout_fd = write_end.get();
  auto pid = s.Spawn(spec);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard child(*pid);
  write_end.Close();
  const std::string out = ReadUntil(read_end.get(), "\x01");  // to EOF
  EXPECT_NE(out.find(":/" + s.neighbor_cgroup(1) + "\n"), std::string::npos) << out;
  EXPECT_EQ(child.Wait(), 0);
  const OwnedNames names = NamesOf(s);
  ASSERT_TRUE(s.Teardown().ok());
  ExpectAllGone(names);
}

TEST_F(SandboxTest, SameNameTwiceInOneProcessIsAlreadyExists) {
  auto first = Sandbox::Create(Options("twice", 1, false));
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Sandbox::Create(Options("twice", 1, false));
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists) << second.status();
  ASSERT_TRUE((*first)->Teardown().ok());
  auto third = Sandbox::Create(Options("twice", 1, false));  // the name is free again
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST_F(SandboxTest, LeftoversCarryingOurPidAreReplaced) {
  // A previous process with this pid left a job cgroup with an extra child cgroup.
  const std::string job = root_ + "/reuse-" + std::to_string(::getpid());
  std::set<std::string> mounts;
  for (const auto& [controller, mount] : CgroupMounts()) mounts.insert(mount);
  for (const std::string& mount : mounts) {
    ::mkdir((mount + "/" + root_).c_str(), 0755);
    ::mkdir((mount + "/" + job).c_str(), 0755);
    ASSERT_EQ(::mkdir((mount + "/" + job + "/junk").c_str(), 0755), 0) << std::strerror(errno);
  }
  auto sb = Sandbox::Create(Options("reuse", 1, false));
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ((*sb)->job_cgroup(), job);
  EXPECT_FALSE(CgroupExists("cpu", job + "/junk"));
  EXPECT_FALSE(CgroupExists("cpuacct", job + "/junk"));
  EXPECT_TRUE(CgroupExists("cpu", (*sb)->main_cgroup(0)));
}

TEST_F(SandboxTest, SweepRemovesADeadOwnersSandboxAndKeepsALiveOne) {
  SKIP_WITHOUT_NETNS();
  const std::string root = root_;
  struct SweepGuard {  // whatever happens, the dead owner's leftovers go
    std::string root;
    ~SweepGuard() { (void)SweepStaleSandboxes(root); }
  } guard{root};

  // A child creates a sandbox with a process in it and exits without tearing it down,
  // as a `star local` killed with -9 would. It reports the names it got.
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  FdGuard read_end(p[0]), write_end(p[1]);
  const SandboxOptions stale_options = Options("stale", 2, true);
  const pid_t owner = ::fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {
    auto sb = Sandbox::Create(stale_options);
    if (!sb.ok()) ::_exit(1);
    Sandbox::SpawnSpec spec;
    spec.argv = {"sleep", "30"};
    spec.env = TestEnv();
    spec.cgroup = (*sb)->main_cgroup(0);
    spec.netns_slot = 0;
    if (!(*sb)->Spawn(spec).ok()) ::_exit(2);
    std::string text = (*sb)->job_cgroup() + "\n" + (*sb)->bridge_ifname() + "\n";
    for (int i = 0; i < 2; ++i) text += (*sb)->host_ifname(i) + "\n" + (*sb)->netns(i) + "\n";
    const ssize_t w = ::write(write_end.get(), text.data(), text.size());
    ::_exit(w == static_cast<ssize_t>(text.size()) ? 0 : 3);  // no destructors: leak it all
  }
  ChildGuard owner_guard(owner);
  write_end.Close();
  const int status = owner_guard.Wait();  // reaped: its pid is dead now
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::istringstream in(ReadUntil(read_end.get(), "\x01"));
  OwnedNames stale;
  std::getline(in, stale.job_cgroup);
  std::getline(in, stale.bridge);
  for (int i = 0; i < 2; ++i) {
    std::string veth, ns;
    std::getline(in, veth);
    std::getline(in, ns);
    stale.veths.push_back(veth);
    stale.namespaces.push_back(ns);
  }
  ASSERT_EQ(stale.job_cgroup, root + "/stale-" + std::to_string(owner));
  ExpectAllExist(stale);

  auto live = Sandbox::Create(Options("live", 2, true));
  ASSERT_TRUE(live.ok()) << live.status();
  const OwnedNames live_names = NamesOf(**live);

  auto swept = SweepStaleSandboxes(root);
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(*swept, 1);
  ExpectAllGone(stale);
  ExpectAllExist(live_names);

  auto again = SweepStaleSandboxes(root);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, 0);
  auto nothing = SweepStaleSandboxes(root + "-nonexistent");
  ASSERT_TRUE(nothing.ok()) << nothing.status();
  EXPECT_EQ(*nothing, 0);
  EXPECT_EQ(SweepStaleSandboxes("/abs").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace star::local
