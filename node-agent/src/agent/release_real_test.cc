// The restore path on the real OS: a cgroup v1 pod with containers and a veth interface
// in a network namespace of the test's own. After the journal is lost, a rebuilt journal
// plus release puts the pod's quota back to the sum of its containers' and removes every
// qdisc and the IFB device the agent installed. Skipped without root or cgroup v1.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "star/agent/journal_rebuild.h"
#include "star/agent/real_node_os.h"
#include "star/agent/reconciler.h"

namespace star::agent {
namespace {

constexpr char kCpuRoot[] = "/sys/fs/cgroup/cpu";
constexpr char kUid[] = "3c2b1a09-8f7e-4d6c-9b5a-493827161504";

int Sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

// A network namespace with a veth pair (up, as a pod's host side would be); both removed
// at scope exit.
class VethNetns {
 public:
  VethNetns() {
    const std::string id = std::to_string(::getpid());
    ns_ = "star-rel-" + id;
    ifname_ = "strel" + id.substr(0, 9);
    const std::string peer = "strep" + id.substr(0, 9);
    ok_ = Sh("ip netns add " + ns_) == 0 &&
          Sh("ip -n " + ns_ + " link add " + ifname_ + " type veth peer name " + peer) == 0 &&
          Sh("ip -n " + ns_ + " link set " + ifname_ + " up") == 0 &&
          Sh("ip -n " + ns_ + " link set " + peer + " up") == 0;
  }
  ~VethNetns() { Sh("ip netns del " + ns_); }  // takes the interfaces with it
  bool ok() const { return ok_; }
  const std::string& ns() const { return ns_; }
  const std::string& ifname() const { return ifname_; }

 private:
  std::string ns_, ifname_;
  bool ok_ = false;
};

// A RealNodeOs whose netlink socket lives in namespace `ns`.
StatusOr<std::unique_ptr<NodeOs>> NodeOsIn(const std::string& ns, const RealNodeOsOptions& options) {
  StatusOr<std::unique_ptr<NodeOs>> out = Status::Internal("not run");
  std::thread t([&] {
    const int fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    const bool entered = fd >= 0 && ::unshare(CLONE_FS) == 0 && ::setns(fd, CLONE_NEWNET) == 0;
    if (fd >= 0) ::close(fd);
    out = entered ? NewRealNodeOs(options) : StatusOr<std::unique_ptr<NodeOs>>(Status::Internal("setns " + ns));
  });
  t.join();
  return out;
}

// cgroup directories under kCpuRoot, made in order and removed leaf first.
class Cgroups {
 public:
  bool Make(const std::string& rel, int64_t quota = 0) {
    const std::string dir = std::string(kCpuRoot) + "/" + rel;
    if (::mkdir(dir.c_str(), 0755) != 0) return false;
    made_.push_back(dir);
    if (quota != 0) std::ofstream(dir + "/cpu.cfs_quota_us") << quota;
    return true;
  }
  ~Cgroups() {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) ::rmdir(it->c_str());
  }

 private:
  std::vector<std::string> made_;
};

TEST(ReleaseRealTest, AfterALostJournalReleaseRestoresTheQuotaAndRemovesTheAgentsTc) {
  if (::geteuid() != 0 || ::access((std::string(kCpuRoot) + "/cpu.cfs_quota_us").c_str(), F_OK) != 0) {
    GTEST_SKIP() << "needs root and a cgroup v1 cpu hierarchy at " << kCpuRoot;
  }
  const std::string root = "star-release-test-" + std::to_string(::getpid());
  const std::string pod = root + "/kubepods/burstable/pod" + kUid;
  Cgroups cg;
  for (const std::string& d : {root, root + "/kubepods", root + "/kubepods/burstable", pod}) {
    ASSERT_TRUE(cg.Make(d)) << d;
  }
  ASSERT_TRUE(cg.Make(pod + "/c1", 50000) && cg.Make(pod + "/c2", 50000));
  VethNetns net;
  ASSERT_TRUE(net.ok());
  RealNodeOsOptions os_options;
  os_options.allowed_prefix = root + "/kubepods";
  auto made = NodeOsIn(net.ns(), os_options);
  ASSERT_TRUE(made.ok()) << made.status();
  NodeOs& os = **made;
  ASSERT_TRUE(os.WriteCpu(pod, CpuLimits{100000, 100000, 100}).ok());  // as the kubelet set it

  ReconcilerOptions options;
  options.driver = CgroupDriver::kCgroupfs;
  options.cgroup_root = root;
  api::NodeAllocation alloc;
  alloc.name = "node-1";
  api::PodAllocation p;
  p.namespace_ = "ns";
  p.name = "worker-0";
  p.uid = kUid;
  p.cpu = {500, 100};
  p.network = {8'000'000, 16'000'000, 1};
  alloc.spec.pods.push_back(p);
  const InterfaceMap interfaces = {{kUid, net.ifname()}};
  {
    Journal lost = Journal::InMemory();
    Reconciler first(os, lost, options);
    auto applied = first.Reconcile(alloc, interfaces);
    ASSERT_TRUE(applied.ok() && applied->all_ok()) << applied.status();
  }
  ASSERT_EQ(os.ReadCpu(pod)->quota_us, 50000);
  ASSERT_EQ(*os.ReadNet(net.ifname()), DesiredNet(p.network));
  ASSERT_TRUE(*os.InterfaceExists(IfbName(net.ifname())));

  auto rebuilt = RebuildOriginals(os, CgroupDriver::kCgroupfs, root);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  ASSERT_EQ(rebuilt->count(kUid), 1u);
  EXPECT_EQ(rebuilt->at(kUid).cpu->limits.quota_us, 100000);
  Journal journal = Journal::InMemory();
  ASSERT_TRUE(journal.Commit({rebuilt->begin(), rebuilt->end()}).ok());
  options.unshaped_net_originals = true;
  Reconciler second(os, journal, options);
  auto again = second.Reconcile(alloc, interfaces);
  ASSERT_TRUE(again.ok() && again->all_ok()) << again.status();
  auto released = second.ReleaseAll();
  ASSERT_TRUE(released.ok() && released->all_ok()) << released.status();

  EXPECT_EQ(os.ReadCpu(pod)->quota_us, 100000);
  EXPECT_EQ(*os.ReadNet(net.ifname()), NetLimits{});
  EXPECT_FALSE(*os.InterfaceExists(IfbName(net.ifname())));
  EXPECT_NE(Sh("ip netns exec " + net.ns() + " tc qdisc show dev " + net.ifname() + " | grep -q htb"), 0);
  EXPECT_TRUE(journal.entries().empty());
}

}  // namespace
}  // namespace star::agent
