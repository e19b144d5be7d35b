// Finding a pod's host-side interface on the real kernel, with no annotation: a "node"
// network namespace (where the agent's netlink socket lives, standing in for the host's)
// and a "pod" namespace joined by a veth pair whose pod end is eth0, a process inside the
// pod namespace placed in a cgroup v1 container cgroup below the kubelet's pod cgroup.
// The agent finds the node-side veth and shapes it; a process in the node's own namespace
// (a host-network pod), an empty cgroup and a vanished veth are refused, and nothing is
// shaped for them. Every namespace, link, cgroup and process is removed at scope exit.
// Skipped without root or cgroup v1.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "star/agent/real_node_os.h"
#include "star/agent/reconciler.h"

namespace star::agent {
namespace {

constexpr char kCpuRoot[] = "/sys/fs/cgroup/cpu";
constexpr char kPodUid[] = "7d1c2b3a-4e5f-4a6b-8c7d-112233445566";
constexpr char kHostNetUid[] = "7d1c2b3a-4e5f-4a6b-8c7d-665544332211";

// The shell's exit status (-1 when it did not exit).
int Sh(const std::string& cmd) {
  const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The node and pod namespaces and the veth pair between them; deleting the namespaces
// takes the pair with them.
class PodNetwork {
 public:
  PodNetwork() {
    const std::string id = std::to_string(::getpid());
    node_ = "star-pin-" + id;
    pod_ = "star-pip-" + id;
    veth_ = "stpi" + id.substr(0, 10);
    ok_ = Sh("ip netns add " + node_) == 0 && Sh("ip netns add " + pod_) == 0 &&
          Sh("ip -n " + node_ + " link add " + veth_ + " type veth peer name eth0 netns " + pod_) == 0 &&
          Sh("ip -n " + node_ + " link set " + veth_ + " up") == 0 &&
          Sh("ip -n " + pod_ + " link set eth0 up") == 0;
  }
  ~PodNetwork() {
    Sh("ip netns del " + pod_);
    Sh("ip netns del " + node_);
  }
  bool ok() const { return ok_; }
  const std::string& node() const { return node_; }
  const std::string& pod() const { return pod_; }
  const std::string& veth() const { return veth_; }

 private:
  std::string node_, pod_, veth_;
  bool ok_ = false;
};

// A process that enters namespace `ns` and waits there; killed and reaped at scope exit.
class ProcessIn {
 public:
  explicit ProcessIn(const std::string& ns) {
    const std::string path = "/var/run/netns/" + ns;
    int ready[2];
    if (::pipe(ready) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      const char c = fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0 ? 'R' : 'E';
      if (::write(ready[1], &c, 1) != 1) _exit(1);
      for (;;) ::pause();  // killed by the guard
    }
    ::close(ready[1]);
    char c = 0;
    entered_ = pid_ > 0 && ::read(ready[0], &c, 1) == 1 && c == 'R';
    ::close(ready[0]);
  }
  ~ProcessIn() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  bool ok() const { return entered_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool entered_ = false;
};

// cgroup directories under kCpuRoot, made in order and removed leaf first (their
// processes must be gone by then).
class Cgroups {
 public:
  bool Make(const std::string& rel) {
    const std::string dir = std::string(kCpuRoot) + "/" + rel;
    if (::mkdir(dir.c_str(), 0755) != 0) return false;
    made_.push_back(dir);
    return true;
  }
  static bool Attach(const std::string& rel, pid_t pid) {
    std::ofstream out(std::string(kCpuRoot) + "/" + rel + "/cgroup.procs");
    out << pid;
    out.flush();
    return static_cast<bool>(out);
  }
  ~Cgroups() {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) ::rmdir(it->c_str());
  }

 private:
  std::vector<std::string> made_;
};

// A RealNodeOs whose netlink socket, and so its idea of the node's namespace, is `ns`.
StatusOr<std::unique_ptr<NodeOs>> NodeOsIn(const std::string& ns, const RealNodeOsOptions& options) {
  StatusOr<std::unique_ptr<NodeOs>> out = Status::Internal("not run");
  std::thread t([&] {
    const int fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    const bool entered = fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0;
    if (fd >= 0) ::close(fd);
    out = entered ? NewRealNodeOs(options) : StatusOr<std::unique_ptr<NodeOs>>(Status::Internal("setns " + ns));
  });
  t.join();
  return out;
}

api::PodAllocation Pod(const std::string& uid, const std::string& name) {
  api::PodAllocation p;
  p.namespace_ = "ns";
  p.name = name;
  p.uid = uid;
  p.cpu = {500, 100};
  p.network = {8'000'000, 0, 1};
  return p;
}

TEST(PodInterfaceRealTest, FindsThePodsHostSideVethAndShapesItWithoutAnAnnotation) {
  if (::geteuid() != 0 || ::access((std::string(kCpuRoot) + "/cpu.cfs_quota_us").c_str(), F_OK) != 0) {
    GTEST_SKIP() << "needs root and a cgroup v1 cpu hierarchy at " << kCpuRoot;
  }
  const std::string root = "star-podif-test-" + std::to_string(::getpid());
  const std::string pod = root + "/kubepods/burstable/pod" + kPodUid;
  const std::string hostnet = root + "/kubepods/burstable/pod" + kHostNetUid;
  Cgroups cg;
  for (const std::string& d : {root, root + "/kubepods", root + "/kubepods/burstable", pod,
                               pod + "/c1", hostnet, hostnet + "/c1"}) {
    ASSERT_TRUE(cg.Make(d)) << d;
  }
  PodNetwork net;
  ASSERT_TRUE(net.ok());
  RealNodeOsOptions os_options;
  os_options.allowed_prefix = root + "/kubepods";
  auto made = NodeOsIn(net.node(), os_options);
  ASSERT_TRUE(made.ok()) << made.status();
  NodeOs& os = **made;

  // No process yet: nothing to find.
  EXPECT_EQ(os.PodInterface(pod).status().code(), StatusCode::kNotFound);

  ProcessIn in_pod(net.pod());
  ASSERT_TRUE(in_pod.ok());
  ASSERT_TRUE(Cgroups::Attach(pod + "/c1", in_pod.pid()));
  ProcessIn in_node(net.node());  // a host-network pod: the node's own namespace
  ASSERT_TRUE(in_node.ok());
  ASSERT_TRUE(Cgroups::Attach(hostnet + "/c1", in_node.pid()));

  auto found = os.PodInterface(pod);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, net.veth());
  auto host = os.PodInterface(hostnet);
  EXPECT_EQ(host.status().code(), StatusCode::kFailedPrecondition) << host.status();

  // The reconciler with no interface mapping: the pod's veth is shaped, the host-network
  // pod is skipped with its reason and gets its CPU.
  ReconcilerOptions options;
  options.driver = CgroupDriver::kCgroupfs;
  options.cgroup_root = root;
  api::NodeAllocation alloc;
  alloc.name = "node-1";
  alloc.spec.pods = {Pod(kPodUid, "worker-0"), Pod(kHostNetUid, "hostnet-0")};
  Journal journal = Journal::InMemory();
  Reconciler reconciler(os, journal, options);
  auto applied = reconciler.Reconcile(alloc);
  ASSERT_TRUE(applied.ok()) << applied.status();
  ASSERT_TRUE(applied->all_ok());
  EXPECT_EQ(applied->pods[0].interface, net.veth());
  EXPECT_TRUE(applied->pods[0].network_skipped.ok()) << applied->pods[0].network_skipped;
  EXPECT_EQ(*os.ReadNet(net.veth()), DesiredNet(alloc.spec.pods[0].network));
  EXPECT_EQ(applied->pods[1].network_skipped.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(applied->pods[1].interface, "");
  EXPECT_EQ(os.ReadCpu(hostnet)->quota_us, 50000);
  // The only interface shaped in the node's namespace is the pod's veth.
  EXPECT_EQ(Sh("tc -n " + net.node() + " qdisc show | grep htb | grep -qv 'dev " + net.veth() + " '"), 1);

  auto released = reconciler.ReleaseAll();
  ASSERT_TRUE(released.ok() && released->all_ok()) << released.status();
  EXPECT_EQ(*os.ReadNet(net.veth()), NetLimits{});

  // The veth deleted under the pod: not found, and nothing else is taken for it.
  ASSERT_EQ(Sh("ip -n " + net.node() + " link del " + net.veth()), 0);
  EXPECT_EQ(os.PodInterface(pod).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace star::agent
