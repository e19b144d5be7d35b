// RealNodeOs on the real kernel (needs root): a CPU burner in a test cgroup is throttled
// to the quota and released again; a TCP transfer between two test network namespaces
// joined by a veth pair is limited to the installed egress (resp. ingress, through an IFB
// device) rate and released again.
// Every cgroup, namespace and process created here is removed by an RAII guard.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "star/agent/real_node_os.h"

namespace star::agent {
namespace {

using Clock = std::chrono::steady_clock;

// A forked child, killed and reaped when the guard goes.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { Stop(); }
  pid_t pid() const { return pid_; }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_;
};

std::string MountOf(const std::string& controller) {
  std::ifstream in("/proc/mounts");
  std::string dev, dir, type, opts, rest;
  while (in >> dev >> dir >> type >> opts && std::getline(in, rest)) {
    if (type != "cgroup") continue;
    std::stringstream ss(opts);
    std::string o;
    while (std::getline(ss, o, ',')) {
      if (o == controller) return dir;
    }
  }
  return "";
}

bool WriteString(const std::string& path, const std::string& v) {
  std::ofstream out(path);
  out << v;
  out.flush();
  return static_cast<bool>(out);
}

// A v1 cgroup made in the cpu and (when mounted) cpuacct hierarchies; on destruction its
// processes are moved back to the root cgroup and the directories removed.
class TestCgroup {
 public:
  explicit TestCgroup(std::string name) : name_(std::move(name)) {
    for (const char* c : {"cpu", "cpuacct"}) {
      std::string m = MountOf(c);
      if (m.empty()) continue;
      if (::mkdir((m + "/" + name_).c_str(), 0755) == 0) dirs_.push_back(m);
    }
  }
  ~TestCgroup() {
    for (const std::string& m : dirs_) {
      for (int i = 0; i < 10; ++i) {
        std::ifstream procs(m + "/" + name_ + "/cgroup.procs");
        std::string pid;
        bool any = false;
        while (procs >> pid) any = WriteString(m + "/cgroup.procs", pid) || any;
        if (!any) break;
      }
      ::rmdir((m + "/" + name_).c_str());
    }
  }
  bool ok() const { return !dirs_.empty(); }
  bool Attach(pid_t pid) const {
    bool ok = !dirs_.empty();
    for (const std::string& m : dirs_) ok = WriteString(m + "/" + name_ + "/cgroup.procs", std::to_string(pid)) && ok;
    return ok;
  }

 private:
  std::string name_;
  std::vector<std::string> dirs_;
};

bool IsRoot() { return ::geteuid() == 0; }

TEST(RealNodeOs, RefusesCgroupsOutsideTheAllowedPrefix) {
  if (!IsRoot()) GTEST_SKIP() << "needs root";
  RealNodeOsOptions opts;
  opts.allowed_prefix = "star-test-x";
  auto os = NewRealNodeOs(opts);
  ASSERT_TRUE(os.ok()) << os.status();
  EXPECT_EQ((*os)->ReadCpu("kubepods/pod1").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*os)->WriteCpu("/star-test-x", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*os)->WriteCpu("star-test-x/../y", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*os)->ReadCpu("star-test-x/missing").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(*(*os)->CgroupExists("star-test-x/missing"));
}

TEST(RealNodeOs, CpuBurnerIsThrottledToTheQuotaAndReleased) {
  if (!IsRoot()) GTEST_SKIP() << "needs root";
  const std::string name = "star-test-" + std::to_string(::getpid());
  RealNodeOsOptions opts;
  opts.allowed_prefix = name;
  auto made = NewRealNodeOs(opts);
  ASSERT_TRUE(made.ok()) << made.status();
  NodeOs& os = **made;
  if (os.cgroup_version() != CgroupVersion::kV1) GTEST_SKIP() << "test written for cgroup v1";
  TestCgroup cg(name);
  ASSERT_TRUE(cg.ok());
  ASSERT_TRUE(*os.CgroupExists(name));

  auto* progress = static_cast<std::atomic<uint64_t>*>(
      ::mmap(nullptr, sizeof(std::atomic<uint64_t>), PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(progress, MAP_FAILED);
  new (progress) std::atomic<uint64_t>(0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    for (;;) progress->fetch_add(1, std::memory_order_relaxed);  // killed by the parent
  }
  Child burner(pid);
  ASSERT_TRUE(cg.Attach(pid));

  struct Sample {
    CpuStats stats;
    uint64_t progress;
    Clock::time_point t;
  };
  auto sample = [&]() {
    auto s = os.ReadCpuStats(name);
    EXPECT_TRUE(s.ok()) << s.status();
    return Sample{s.ok() ? *s : CpuStats{}, progress->load(), Clock::now()};
  };
  auto secs = [](const Sample& a, const Sample& b) {
    return std::chrono::duration<double>(b.t - a.t).count();
  };
  // Measurement windows (not synchronisation): usage is averaged over them.
  const auto window = std::chrono::milliseconds(1000);

  Sample f0 = sample();
  std::this_thread::sleep_for(window);
  Sample f1 = sample();
  const double free_rate = (f1.progress - f0.progress) / secs(f0, f1);

  const CpuLimits quota{20000, 100000, 100};
  { Status st = os.WriteCpu(name, quota); ASSERT_TRUE(st.ok()) << st; }
  auto back = os.ReadCpu(name);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, quota);
  Sample t0 = sample();
  std::this_thread::sleep_for(window);
  Sample t1 = sample();
  const double share = (t1.stats.usage_usec - t0.stats.usage_usec) / 1e6 / secs(t0, t1);
  const double thr_rate = (t1.progress - t0.progress) / secs(t0, t1);
  EXPECT_GT(t1.stats.nr_throttled, t0.stats.nr_throttled);
  EXPECT_GT(t1.stats.throttled_usec, t0.stats.throttled_usec);
  EXPECT_GE(share, 0.10);
  EXPECT_LE(share, 0.30);
  EXPECT_LT(thr_rate, 0.5 * free_rate);

  { Status st = os.WriteCpu(name, CpuLimits{}); ASSERT_TRUE(st.ok()) << st; }
  EXPECT_EQ(os.ReadCpu(name)->quota_us, -1);
  Sample r0 = sample();
  std::this_thread::sleep_for(window);
  Sample r1 = sample();
  const double rel_rate = (r1.progress - r0.progress) / secs(r0, r1);
  const double rel_share = (r1.stats.usage_usec - r0.stats.usage_usec) / 1e6 / secs(r0, r1);
  EXPECT_LE(r1.stats.nr_throttled - r0.stats.nr_throttled, 1);
  EXPECT_GT(rel_rate, 1.5 * thr_rate);
  std::cout << "[cpu] quota 0.20 CPU: measured share " << share << " (cpuacct), progress "
            << thr_rate / free_rate << " of unthrottled; nr_throttled +"
            << t1.stats.nr_throttled - t0.stats.nr_throttled << "; released: share " << rel_share
            << ", progress " << rel_rate / free_rate << " of unthrottled, nr_throttled +"
            << r1.stats.nr_throttled - r0.stats.nr_throttled << "\n";
  burner.Stop();
  ::munmap(progress, sizeof(std::atomic<uint64_t>));
}

// ---------------------------------------------------------------------------------------
// Two network namespaces joined by a veth pair; addresses only inside them.

int Sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

class NetnsPair {
 public:
  NetnsPair() {
    const std::string id = std::to_string(::getpid());
    a_ = "star-a-" + id;
    b_ = "star-b-" + id;
    va_ = "sta" + id;
    vb_ = "stb" + id;
    const std::string net = "10.213." + std::to_string(::getpid() % 250) + ".";
    addr_a_ = net + "1";
    addr_b_ = net + "2";
    ok_ = Sh("ip netns add " + a_) == 0;
    ok_ = Sh("ip netns add " + b_) == 0 && ok_;
    ok_ = ok_ && Sh("ip link add " + va_ + " netns " + a_ + " type veth peer name " + vb_ +
                    " netns " + b_) == 0;
    ok_ = ok_ && Sh("ip -n " + a_ + " addr add " + net + "1/30 dev " + va_) == 0;
    ok_ = ok_ && Sh("ip -n " + b_ + " addr add " + addr_b_ + "/30 dev " + vb_) == 0;
    ok_ = ok_ && Sh("ip -n " + a_ + " link set " + va_ + " up") == 0;
    ok_ = ok_ && Sh("ip -n " + b_ + " link set " + vb_ + " up") == 0;
  }
  ~NetnsPair() {
    Sh("ip netns del " + a_);  // takes the veth pair with it
    Sh("ip netns del " + b_);
  }
  bool ok() const { return ok_; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }
  const std::string& veth_a() const { return va_; }
  const std::string& addr_a() const { return addr_a_; }
  const std::string& addr_b() const { return addr_b_; }
  // Whether namespace `ns` holds any ifb device.
  static bool HasIfb(const std::string& ns) { return !IfbName(ns).empty(); }
  // The name of the first ifb device in namespace `ns`, "" if none.
  static std::string IfbName(const std::string& ns) {
    std::string out;
    if (FILE* f = ::popen(("ip -n " + ns + " -o link show type ifb 2>/dev/null").c_str(), "r")) {
      char line[512];
      if (std::fgets(line, sizeof(line), f) != nullptr) {
        std::string l(line);  // "7: name: <FLAGS> ..."
        size_t a = l.find(": "), b = a == std::string::npos ? a : l.find(':', a + 2);
        if (b != std::string::npos) out = l.substr(a + 2, b - a - 2);
      }
      ::pclose(f);
    }
    return out;
  }

 private:
  std::string a_, b_, va_, vb_, addr_a_, addr_b_;
  bool ok_ = false;
};

bool EnterNetns(const std::string& ns) {
  int fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

struct TransferResult {
  int64_t bytes = 0;
  double seconds = 0;
  double Mbit() const { return seconds > 0 ? bytes * 8 / seconds / 1e6 : 0; }
};

// Sends `bytes` over TCP from namespace `from` to `to_addr`:5201 in namespace `to`; the
// receiver times first byte to end of stream. Bounded by timeouts; children are reaped.
StatusOr<TransferResult> Transfer(const std::string& from, const std::string& to,
                                  const std::string& to_addr, int64_t bytes) {
  int ready[2], result[2];
  if (::pipe(ready) != 0 || ::pipe(result) != 0) return Status::Internal("pipe");
  pid_t rp = ::fork();
  if (rp < 0) return Status::Internal("fork");
  if (rp == 0) {  // receiver
    if (!EnterNetns(to)) _exit(2);
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(5201);
    ::inet_pton(AF_INET, to_addr.c_str(), &a.sin_addr);
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(s, 1) != 0) _exit(3);
    char r = 'R';
    if (::write(ready[1], &r, 1) != 1) _exit(4);
    pollfd p{s, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) _exit(5);
    int c = ::accept(s, nullptr, nullptr);
    static char buf[1 << 16];
    TransferResult res;
    Clock::time_point first{}, last{};
    for (;;) {
      pollfd q{c, POLLIN, 0};
      if (::poll(&q, 1, 20000) != 1) _exit(6);
      ssize_t n = ::read(c, buf, sizeof(buf));
      if (n <= 0) break;
      if (res.bytes == 0) first = Clock::now();
      last = Clock::now();
      res.bytes += n;
    }
    res.seconds = std::chrono::duration<double>(last - first).count();
    if (::write(result[1], &res, sizeof(res)) != sizeof(res)) _exit(7);
    _exit(0);
  }
  Child receiver(rp);
  ::close(ready[1]);
  ::close(result[1]);
  pollfd p{ready[0], POLLIN, 0};
  char r = 0;
  bool up = ::poll(&p, 1, 10000) == 1 && ::read(ready[0], &r, 1) == 1;
  ::close(ready[0]);
  if (!up) {
    ::close(result[0]);
    return Status::DeadlineExceeded("receiver did not start");
  }
  pid_t sp = ::fork();
  if (sp < 0) return Status::Internal("fork");
  if (sp == 0) {  // sender
    if (!EnterNetns(from)) _exit(2);
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(5201);
    ::inet_pton(AF_INET, to_addr.c_str(), &a.sin_addr);
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) _exit(3);
    static char buf[1 << 16] = {};
    int64_t left = bytes;
    while (left > 0) {
      ssize_t n = ::write(s, buf, static_cast<size_t>(std::min<int64_t>(left, sizeof(buf))));
      if (n <= 0) _exit(4);
      left -= n;
    }
    ::close(s);
    _exit(0);
  }
  Child sender(sp);
  TransferResult res;
  pollfd q{result[0], POLLIN, 0};
  bool got = ::poll(&q, 1, 30000) == 1 && ::read(result[0], &res, sizeof(res)) == sizeof(res);
  ::close(result[0]);
  if (!got) return Status::DeadlineExceeded("transfer did not finish");
  return res;
}

// Creates the RealNodeOs from inside namespace `ns` (its netlink socket stays there).
StatusOr<std::unique_ptr<NodeOs>> NodeOsIn(const std::string& ns) {
  StatusOr<std::unique_ptr<NodeOs>> out = Status::Internal("not run");
  std::thread t([&] {
    if (::unshare(CLONE_FS) != 0 || !EnterNetns(ns)) {
      out = Status::Internal("setns " + ns);
      return;
    }
    out = NewRealNodeOs(RealNodeOsOptions{});
  });
  t.join();
  return out;
}

TEST(RealNodeOs, VethEgressIsLimitedToTheRateAndReleased) {
  if (!IsRoot()) GTEST_SKIP() << "needs root";
  NetnsPair net;
  ASSERT_TRUE(net.ok());
  auto made = NodeOsIn(net.a());
  ASSERT_TRUE(made.ok()) << made.status();
  NodeOs& os = **made;
  const std::string& ifname = net.veth_a();
  ASSERT_TRUE(*os.InterfaceExists(ifname));
  EXPECT_FALSE(*os.InterfaceExists("nosuchif0"));
  EXPECT_EQ(*os.ReadNet(ifname), NetLimits{});

  const NetLimits limit{20'000'000, 0, 2};
  { Status st = os.WriteNet(ifname, limit); ASSERT_TRUE(st.ok()) << st; }
  { Status st = os.WriteNet(ifname, limit); ASSERT_TRUE(st.ok()) << st; }  // idempotent
  EXPECT_EQ(*os.ReadNet(ifname), limit);

  const int64_t kBytes = 5'000'000;
  auto s0 = os.ReadNetStats(ifname);
  auto limited = Transfer(net.a(), net.b(), net.addr_b(), kBytes);
  auto s1 = os.ReadNetStats(ifname);
  ASSERT_TRUE(limited.ok()) << limited.status();
  ASSERT_TRUE(s0.ok() && s1.ok());
  EXPECT_EQ(limited->bytes, kBytes);
  EXPECT_GE(s1->tx_bytes - s0->tx_bytes, kBytes);
  EXPECT_NEAR(limited->Mbit(), 20.0, 2.0);

  { Status st = os.WriteNet(ifname, NetLimits{}); ASSERT_TRUE(st.ok()) << st; }
  { Status st = os.WriteNet(ifname, NetLimits{}); ASSERT_TRUE(st.ok()) << st; }  // removing again is fine
  EXPECT_EQ(*os.ReadNet(ifname), NetLimits{});
  auto released = Transfer(net.a(), net.b(), net.addr_b(), kBytes);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_GT(released->Mbit(), 60.0);
  std::cout << "[net] egress limit 20 Mbit/s: TCP goodput " << limited->Mbit()
            << " Mbit/s; released: " << released->Mbit() << " Mbit/s\n";
}

// Ingress on veth_a = traffic arriving in namespace a: sent from b to a.
TEST(RealNodeOs, VethIngressIsLimitedToTheRateAndReleased) {
  if (!IsRoot()) GTEST_SKIP() << "needs root";
  // When the ifb module is not loaded yet, load it without its default devices (ifb0,
  // ifb1 in the root namespace), so the test leaves no interface behind.
  if (Sh("test -d /sys/module/ifb") != 0) Sh("modprobe ifb numifbs=0");
  NetnsPair net;
  ASSERT_TRUE(net.ok());
  auto made = NodeOsIn(net.a());
  ASSERT_TRUE(made.ok()) << made.status();
  NodeOs& os = **made;
  const std::string& ifname = net.veth_a();
  EXPECT_EQ(*os.ReadNet(ifname), NetLimits{});
  EXPECT_EQ(os.WriteNet("nosuchif0", NetLimits{0, 20'000'000, 0}).code(), StatusCode::kNotFound);
  EXPECT_FALSE(NetnsPair::HasIfb(net.a()));

  const NetLimits limit{0, 20'000'000, 3};
  { Status st = os.WriteNet(ifname, limit); ASSERT_TRUE(st.ok()) << st; }
  { Status st = os.WriteNet(ifname, limit); ASSERT_TRUE(st.ok()) << st; }  // idempotent
  EXPECT_EQ(*os.ReadNet(ifname), limit);
  const std::string ifb = NetnsPair::IfbName(net.a());
  ASSERT_FALSE(ifb.empty());
  EXPECT_EQ(ifb, agent::IfbName(ifname));  // the one name `star local` removes too

  const int64_t kBytes = 5'000'000;
  auto s0 = os.ReadNetStats(ifname);
  auto limited = Transfer(net.b(), net.a(), net.addr_a(), kBytes);
  auto s1 = os.ReadNetStats(ifname);
  ASSERT_TRUE(limited.ok()) << limited.status();
  ASSERT_TRUE(s0.ok() && s1.ok());
  EXPECT_EQ(limited->bytes, kBytes);
  EXPECT_GE(s1->rx_bytes - s0->rx_bytes, kBytes);
  EXPECT_NEAR(limited->Mbit(), 20.0, 2.0);

  // The IFB deleted behind our back: reported as no ingress limit, and the next write
  // recreates it and re-points the redirect filter at the new device.
  const std::string redirect = "tc -n " + net.a() + " filter show dev " + ifname +
                               " ingress | grep -q 'Redirect to device " + ifb + ")'";
  EXPECT_EQ(Sh(redirect), 0);
  ASSERT_EQ(Sh("ip -n " + net.a() + " link del " + ifb), 0);
  EXPECT_EQ(os.ReadNet(ifname)->ingress_bits_per_second, 0);
  { Status st = os.WriteNet(ifname, limit); ASSERT_TRUE(st.ok()) << st; }
  EXPECT_EQ(*os.ReadNet(ifname), limit);
  EXPECT_EQ(Sh(redirect), 0);

  // Both directions at once, then changing only the ingress rate, keep each other intact.
  const NetLimits both{30'000'000, 20'000'000, 1};
  { Status st = os.WriteNet(ifname, both); ASSERT_TRUE(st.ok()) << st; }
  EXPECT_EQ(*os.ReadNet(ifname), both);
  const NetLimits both2{30'000'000, 10'000'000, 1};
  { Status st = os.WriteNet(ifname, both2); ASSERT_TRUE(st.ok()) << st; }
  EXPECT_EQ(*os.ReadNet(ifname), both2);
  { Status st = os.WriteNet(ifname, NetLimits{30'000'000, 0, 1}); ASSERT_TRUE(st.ok()) << st; }
  EXPECT_EQ(*os.ReadNet(ifname), (NetLimits{30'000'000, 0, 1}));
  EXPECT_FALSE(NetnsPair::HasIfb(net.a()));
  { Status st = os.WriteNet(ifname, limit); ASSERT_TRUE(st.ok()) << st; }
  EXPECT_EQ(*os.ReadNet(ifname), limit);

  { Status st = os.WriteNet(ifname, NetLimits{}); ASSERT_TRUE(st.ok()) << st; }
  { Status st = os.WriteNet(ifname, NetLimits{}); ASSERT_TRUE(st.ok()) << st; }  // removing again is fine
  EXPECT_EQ(*os.ReadNet(ifname), NetLimits{});
  EXPECT_FALSE(NetnsPair::HasIfb(net.a()));

  // A foreign (non-ifb) device holding the IFB's name: the write fails and nothing of it
  // stays applied, egress included.
  ASSERT_EQ(Sh("ip -n " + net.a() + " link add " + ifb + " type veth peer name " + ifb + "p"), 0);
  EXPECT_EQ(os.WriteNet(ifname, both).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(*os.ReadNet(ifname), NetLimits{});
  EXPECT_NE(Sh("tc -n " + net.a() + " qdisc show dev " + ifname + " | grep -q -e htb -e ingress"), 0);
  ASSERT_EQ(Sh("ip -n " + net.a() + " link del " + ifb), 0);

  auto released = Transfer(net.b(), net.a(), net.addr_a(), kBytes);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_GT(released->Mbit(), 60.0);
  std::cout << "[net] ingress limit 20 Mbit/s: TCP goodput " << limited->Mbit()
            << " Mbit/s; released: " << released->Mbit() << " Mbit/s\n";
}

}  // namespace
}  // namespace star::agent
