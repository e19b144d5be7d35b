#include "star/agent/reconciler.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <utility>

#include <gtest/gtest.h>

#include "agent/temp_dir_for_test.h"

#include "star/agent/faulty_node_os.h"
#include "star/agent/memory_node_os.h"
#include "star/agent/quantity.h"

namespace star::agent {
namespace {

namespace fs = std::filesystem;

using testing_support::TempDir;

std::string Uid(int i) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "00000000-0000-0000-0000-%012d", i);
  return buf;
}
std::string Cgroup(int i) { return "kubepods/burstable/pod" + Uid(i); }
std::string Veth(int i) { return "veth" + std::to_string(i); }

const CpuLimits kOriginalCpu{200000, 100000, 79};  // 2 cores
const NetLimits kOriginalNet{0, 0, 0};

// A node with `n` burstable pods, each with a veth, all at their originals.
void AddPods(MemoryNodeOs& os, int n) {
  for (int i = 0; i < n; ++i) {
    os.AddCgroup(Cgroup(i), kOriginalCpu);
    os.AddInterface(Veth(i), kOriginalNet);
  }
}

api::PodAllocation Pod(int i, int64_t millicores, int64_t egress = 0) {
  api::PodAllocation p;
  p.namespace_ = "ns";
  p.name = "pod-" + std::to_string(i);
  p.uid = Uid(i);
  p.cpu.quota_millicores = millicores;
  p.cpu.weight = 50;
  p.network.egress_bits_per_second = egress;
  p.network.priority = 1;
  return p;
}

api::NodeAllocation Alloc(std::vector<api::PodAllocation> pods) {
  api::NodeAllocation a;
  a.name = "node-1";
  a.spec.pods = std::move(pods);
  return a;
}

InterfaceMap Veths(int n) {
  InterfaceMap m;
  for (int i = 0; i < n; ++i) m[Uid(i)] = Veth(i);
  return m;
}

CpuLimits Cpu(MemoryNodeOs& os, int i) {
  auto c = os.ReadCpu(Cgroup(i));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : CpuLimits{};
}
NetLimits Net(MemoryNodeOs& os, int i) {
  auto n = os.ReadNet(Veth(i));
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *n : NetLimits{};
}

ReconcilerOptions NoSleep(std::vector<std::chrono::milliseconds>* sleeps = nullptr) {
  ReconcilerOptions o;
  o.sleep = [sleeps](std::chrono::milliseconds d) {
    if (sleeps) sleeps->push_back(d);
  };
  return o;
}

TEST(ReconcilerTest, DesiredLimitsFollowTheAllocation) {
  EXPECT_EQ(DesiredCpu({1500, 50}, 100000), (CpuLimits{150000, 100000, 50}));
  EXPECT_EQ(DesiredCpu({0, 100}, 100000), (CpuLimits{-1, 100000, 100}));
  EXPECT_EQ(DesiredCpu({1, 100}, 100000).quota_us, 1000) << "kernel minimum";
  EXPECT_EQ(DesiredCpu({500, 100}, 50000).quota_us, 25000) << "observed period kept";
}

// Regression: quotaMillicores * period_us overflowed int64 for large allocations.
TEST(ReconcilerTest, DesiredCpuSaturatesForAnyInt64) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(DesiredCpu({kMax, 100}, 1'000'000).quota_us, kMaxQuotaUs);
  EXPECT_EQ(DesiredCpu({kMaxQuotaMillicores, 100}, 1'000'000).quota_us, kMaxQuotaMillicores * 1000);
  EXPECT_EQ(DesiredCpu({std::numeric_limits<int64_t>::min(), 100}, 1'000'000).quota_us, 1000);
  EXPECT_EQ(SaturatingMul(kMax, 2), kMax);
  EXPECT_EQ(SaturatingMul(kMax, -2), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(SaturatingAdd(kMax, 1), kMax);
  EXPECT_EQ(SaturatingAdd(std::numeric_limits<int64_t>::min(), -1),
            std::numeric_limits<int64_t>::min());
}

// Regression: quotaMillicores up to 2^53 - 1 passed validation and overflowed
// quota x period; now it is refused, naming the field, and so are rates beyond any bound.
TEST(ReconcilerTest, QuantitiesBeyondTheAgentsLimitsAreRefusedNamingTheField) {
  MemoryNodeOs os;
  AddPods(os, 2);
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  constexpr int64_t kHuge = (int64_t{1} << 53) - 1;
  api::PodAllocation cpu = Pod(1, kHuge);
  api::PodAllocation egress = Pod(1, 500, std::numeric_limits<int64_t>::max());
  api::PodAllocation ingress = Pod(1, 500);
  ingress.network.ingress_bits_per_second = std::numeric_limits<int64_t>::max();
  for (const auto& [pod, field] :
       {std::pair{cpu, "spec.pods[1].cpu.quotaMillicores"},
        std::pair{egress, "spec.pods[1].network.egressBitsPerSecond"},
        std::pair{ingress, "spec.pods[1].network.ingressBitsPerSecond"}}) {
    auto res = r.Reconcile(Alloc({Pod(0, 500), pod}), Veths(2));
    ASSERT_FALSE(res.ok()) << field;
    EXPECT_EQ(res.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(res.status().message().find(field), std::string::npos) << res.status();
  }
  EXPECT_EQ(os.cpu_writes() + os.net_writes(), 0);
  EXPECT_EQ(journal.writes(), 0);
  auto large = r.Reconcile(Alloc({Pod(0, 10'000'000)}), {});  // 10000 CPUs
  ASSERT_TRUE(large.ok()) << large.status();
  EXPECT_EQ(Cpu(os, 0).quota_us, 1'000'000'000);
}

// Regression: the guarantee check multiplied a journalled quota by 1000 unchecked.
TEST(ReconcilerTest, GuaranteeCheckSurvivesAnyJournalledQuota) {
  MemoryNodeOs os;
  AddPods(os, 1);
  Journal journal = Journal::InMemory();
  JournalEntry e;
  e.cpu = CpuOriginal{Cgroup(0), CpuLimits{std::numeric_limits<int64_t>::max(), 100000, 50}};
  ASSERT_TRUE(journal.Commit({{Uid(0), e}}).ok());
  Reconciler r(os, journal, NoSleep());
  api::PodAllocation g = Pod(0, 10'000'000);
  g.guaranteed = true;
  auto res = r.Reconcile(Alloc({g}), {});
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.status().message().find("below its request"), std::string::npos) << res.status();
}

// After a lost journal, an interface's shaping may be the agent's own: its original is
// journalled as unshaped, so a restore removes it.
TEST(ReconcilerTest, UnshapedNetOriginalsRemoveShapingOnRestore) {
  MemoryNodeOs os;
  AddPods(os, 1);
  ASSERT_TRUE(os.WriteNet(Veth(0), NetLimits{1'000'000, 0, 1}).ok());  // left from before
  Journal journal = Journal::InMemory();
  ReconcilerOptions options = NoSleep();
  options.unshaped_net_originals = true;
  Reconciler r(os, journal, options);
  ASSERT_TRUE(r.Reconcile(Alloc({Pod(0, 500, 2'000'000)}), Veths(1)).ok());
  ASSERT_NE(journal.Find(Uid(0)), nullptr);
  EXPECT_EQ(journal.Find(Uid(0))->net->limits, NetLimits{});
  ASSERT_TRUE(r.ReleaseAll().ok());
  EXPECT_EQ(Net(os, 0), NetLimits{});

  // Already at its allocation: nothing is written, but the shaping is still journalled.
  ASSERT_TRUE(os.WriteNet(Veth(0), DesiredNet(Pod(0, 500, 2'000'000).network)).ok());
  ASSERT_TRUE(r.Reconcile(Alloc({Pod(0, 500, 2'000'000)}), Veths(1)).ok());
  ASSERT_NE(journal.Find(Uid(0)), nullptr);
  ASSERT_TRUE(journal.Find(Uid(0))->net.has_value());
  ASSERT_TRUE(r.ReleaseAll().ok());
  EXPECT_EQ(Net(os, 0), NetLimits{});
}

TEST(ReconcilerTest, AppliesThenIsIdempotentThenRestoresOnRemoval) {
  MemoryNodeOs os;
  AddPods(os, 3);
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());

  auto first = r.Reconcile(Alloc({Pod(0, 500, 1'000'000), Pod(1, 1000), Pod(2, 0)}), Veths(2));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->all_ok());
  EXPECT_EQ(Cpu(os, 0), (CpuLimits{50000, 100000, 50}));
  EXPECT_EQ(Net(os, 0), (NetLimits{1'000'000, 0, 1}));
  EXPECT_EQ(Cpu(os, 1), (CpuLimits{100000, 100000, 50}));
  EXPECT_EQ(Cpu(os, 2), (CpuLimits{-1, 100000, 50}));
  EXPECT_EQ(Net(os, 2), kOriginalNet) << "pod 2 has no interface mapping: not shaped";
  EXPECT_EQ(first->pods[0].action, PodAction::kApplied);
  ASSERT_NE(journal.Find(Uid(0)), nullptr);
  EXPECT_EQ(journal.Find(Uid(0))->cpu->limits, kOriginalCpu);
  EXPECT_EQ(journal.Find(Uid(0))->net->limits, kOriginalNet);

  const int64_t writes = os.cpu_writes() + os.net_writes();
  const int64_t journal_writes = journal.writes();
  auto second = r.Reconcile(Alloc({Pod(0, 500, 1'000'000), Pod(1, 1000), Pod(2, 0)}), Veths(2));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->writes, 0);
  EXPECT_EQ(os.cpu_writes() + os.net_writes(), writes) << "second reconcile writes nothing";
  EXPECT_EQ(journal.writes(), journal_writes);
  for (const auto& p : second->pods) EXPECT_EQ(p.action, PodAction::kUnchanged) << p.uid;

  auto third = r.Reconcile(Alloc({Pod(1, 1000)}), Veths(2));
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->all_ok());
  EXPECT_EQ(Cpu(os, 0), kOriginalCpu);
  EXPECT_EQ(Net(os, 0), kOriginalNet);
  EXPECT_EQ(Cpu(os, 2), kOriginalCpu);
  EXPECT_EQ(journal.Find(Uid(0)), nullptr);
  EXPECT_EQ(journal.Find(Uid(2)), nullptr);
  EXPECT_NE(journal.Find(Uid(1)), nullptr);

  auto release = r.ReleaseAll();
  ASSERT_TRUE(release.ok());
  EXPECT_EQ(Cpu(os, 1), kOriginalCpu);
  EXPECT_TRUE(journal.entries().empty());
}

TEST(ReconcilerTest, GuaranteedPodBelowItsRequestRefusesTheWholeAllocation) {
  MemoryNodeOs os;
  AddPods(os, 2);
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  api::PodAllocation g = Pod(1, 1500);  // request = original quota = 2000 millicores
  g.guaranteed = true;
  auto res = r.Reconcile(Alloc({Pod(0, 500), g}), Veths(2));
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(res.status().message().find("ns/pod-1"), std::string::npos) << res.status();
  EXPECT_NE(res.status().message().find("2000"), std::string::npos) << res.status();
  EXPECT_EQ(os.cpu_writes() + os.net_writes(), 0);
  EXPECT_EQ(journal.writes(), 0);

  g.cpu.quota_millicores = 2500;  // above the request: fine
  auto ok = r.Reconcile(Alloc({Pod(0, 500), g}), Veths(2));
  ASSERT_TRUE(ok.ok()) << ok.status();
  // The request is the journalled original, not the (raised) current quota.
  g.cpu.quota_millicores = 2000;
  EXPECT_TRUE(r.Reconcile(Alloc({Pod(0, 500), g}), Veths(2)).ok());
  g.cpu.quota_millicores = 1999;
  EXPECT_FALSE(r.Reconcile(Alloc({Pod(0, 500), g}), Veths(2)).ok());
}

TEST(ReconcilerTest, MalformedAllocationChangesNothing) {
  MemoryNodeOs os;
  AddPods(os, 2);
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  api::PodAllocation hostile = Pod(1, 500);
  hostile.uid = "../../../sys/fs/cgroup";
  api::PodAllocation bad_weight = Pod(1, 500);
  bad_weight.cpu.weight = 0;
  api::PodAllocation dup = Pod(0, 700);
  for (const auto& alloc : {Alloc({Pod(0, 500), hostile}), Alloc({Pod(0, 500), bad_weight}),
                            Alloc({Pod(0, 500), dup})}) {
    auto res = r.Reconcile(alloc, Veths(2));
    ASSERT_FALSE(res.ok());
    EXPECT_EQ(res.status().code(), StatusCode::kInvalidArgument) << res.status();
  }
  InterfaceMap hostile_if = {{Uid(0), "../eth0"}};
  EXPECT_EQ(r.Reconcile(Alloc({Pod(0, 500)}), hostile_if).status().code(),
            StatusCode::kInvalidArgument);
  InterfaceMap shared = {{Uid(0), "veth0"}, {Uid(1), "veth0"}};
  EXPECT_EQ(r.Reconcile(Alloc({Pod(0, 500), Pod(1, 500)}), shared).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(os.cpu_writes() + os.net_writes(), 0);
  EXPECT_EQ(journal.writes(), 0);
}

TEST(ReconcilerTest, PodAlreadyAtItsAllocationIsNotJournalled) {
  MemoryNodeOs os;
  os.AddCgroup(Cgroup(0), CpuLimits{50000, 100000, 50});
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  auto res = r.Reconcile(Alloc({Pod(0, 500)}), {});
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->pods[0].action, PodAction::kUnchanged);
  EXPECT_EQ(journal.writes(), 0);
  EXPECT_EQ(os.cpu_writes(), 0);
}

TEST(ReconcilerTest, MissingPodCgroupFailsOnlyThatPod) {
  MemoryNodeOs os;
  AddPods(os, 1);
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  auto res = r.Reconcile(Alloc({Pod(0, 500), Pod(7, 500)}), {});
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->pods[0].action, PodAction::kApplied);
  EXPECT_EQ(res->pods[1].action, PodAction::kFailed);
  EXPECT_EQ(res->pods[1].status.code(), StatusCode::kNotFound);
  EXPECT_FALSE(res->all_ok());
}

TEST(ReconcilerTest, TransientErrorsAreRetriedWithBackoff) {
  MemoryNodeOs mem;
  AddPods(mem, 2);
  FaultyNodeOs os(&mem);
  os.FailNext(NodeOsMethod::kWriteCpu, Status::Unavailable("busy"), 3);
  os.FailNext(NodeOsMethod::kReadNet, Status::Aborted("interrupted"), 1);
  std::vector<std::chrono::milliseconds> sleeps;
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep(&sleeps));
  auto res = r.Reconcile(Alloc({Pod(0, 500, 1000), Pod(1, 600)}), Veths(2));
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_TRUE(res->all_ok());
  EXPECT_EQ(Cpu(mem, 0).quota_us, 50000);
  EXPECT_EQ(Cpu(mem, 1).quota_us, 60000);
  EXPECT_EQ(os.injected_failures(), 4);
  ASSERT_EQ(sleeps.size(), 4u);
  EXPECT_EQ(sleeps[0], std::chrono::milliseconds(10));  // ReadNet, then WriteCpu x3:
  EXPECT_EQ(sleeps[1], std::chrono::milliseconds(10));
  EXPECT_EQ(sleeps[2], std::chrono::milliseconds(20));
  EXPECT_EQ(sleeps[3], std::chrono::milliseconds(40));
}

TEST(ReconcilerTest, PersistentAndTerminalErrorsFailThePodNotTheRest) {
  MemoryNodeOs mem;
  AddPods(mem, 2);
  FaultyNodeOs os(&mem);
  os.FailNext(NodeOsMethod::kWriteCpu, Status::Unavailable("busy"), 5);  // > max_attempts
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  auto res = r.Reconcile(Alloc({Pod(0, 500), Pod(1, 600)}), {});
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->pods[0].status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(res->pods[1].action, PodAction::kApplied);
  EXPECT_EQ(Cpu(mem, 0), kOriginalCpu);

  os.FailNext(NodeOsMethod::kWriteCpu, Status::InvalidArgument("no"), 1);
  auto again = r.Reconcile(Alloc({Pod(0, 500), Pod(1, 600)}), {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->pods[0].status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(os.calls(NodeOsMethod::kWriteCpu), 7) << "terminal errors are not retried";

  auto healed = r.Reconcile(Alloc({Pod(0, 500), Pod(1, 600)}), {});
  ASSERT_TRUE(healed.ok());
  EXPECT_TRUE(healed->all_ok());
  EXPECT_EQ(Cpu(mem, 0).quota_us, 50000);
}

// kill -9 at every point of an apply: after `n` writes the OS "crashes" (every call
// fails); a new Reconciler over the same journal file and OS state must converge, and
// removing the pods must bring every original back.
TEST(ReconcilerTest, CrashAfterEveryWriteThenRestartConvergesAndRestores) {
  constexpr int kPods = 4;
  const auto desired = Alloc({Pod(0, 500, 1000), Pod(1, 600, 2000), Pod(2, 700), Pod(3, 0)});
  for (int n = 0; n <= 2 * kPods; ++n) {
    SCOPED_TRACE("crash after " + std::to_string(n) + " writes");
    TempDir dir;
    const std::string path = dir.path() + "/journal.json";
    MemoryNodeOs mem;
    AddPods(mem, kPods);
    {
      FaultyNodeOs os(&mem);
      os.CrashAfterWrites(n);
      auto journal = Journal::Open(path);
      ASSERT_TRUE(journal.ok());
      ReconcilerOptions opts = NoSleep();
      opts.max_attempts = 2;
      Reconciler r(os, *journal, opts);
      (void)r.Reconcile(desired, Veths(kPods));  // dies somewhere
    }
    auto journal = Journal::Open(path);  // the restarted agent
    ASSERT_TRUE(journal.ok()) << journal.status();
    Reconciler r(mem, *journal, NoSleep());
    auto res = r.Reconcile(desired, Veths(kPods));
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_TRUE(res->all_ok());
    EXPECT_EQ(Cpu(mem, 1), (CpuLimits{60000, 100000, 50}));
    EXPECT_EQ(Net(mem, 1), (NetLimits{2000, 0, 1}));
    auto idem = r.Reconcile(desired, Veths(kPods));
    ASSERT_TRUE(idem.ok());
    EXPECT_EQ(idem->writes, 0);

    auto removed = r.Reconcile(Alloc({}), Veths(kPods));
    ASSERT_TRUE(removed.ok());
    EXPECT_TRUE(removed->all_ok());
    for (int i = 0; i < kPods; ++i) {
      EXPECT_EQ(Cpu(mem, i), kOriginalCpu) << i;
      EXPECT_EQ(Net(mem, i), kOriginalNet) << i;
    }
    EXPECT_TRUE(journal->entries().empty());
  }
}

TEST(ReconcilerTest, PodGoneWithItsCgroupIsForgotten) {
  MemoryNodeOs os;
  AddPods(os, 1);
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  ASSERT_TRUE(r.Reconcile(Alloc({Pod(0, 500, 1000)}), Veths(1)).ok());
  os.RemoveCgroup(Cgroup(0));
  os.RemoveInterface(Veth(0));
  auto res = r.Reconcile(Alloc({}), {});
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->all_ok());
  EXPECT_TRUE(journal.entries().empty());
}

TEST(ReconcilerTest, ChangedInterfaceMappingRestoresTheOldInterface) {
  MemoryNodeOs os;
  AddPods(os, 2);
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  ASSERT_TRUE(r.Reconcile(Alloc({Pod(0, 500, 1000)}), {{Uid(0), Veth(0)}}).ok());
  EXPECT_EQ(Net(os, 0).egress_bits_per_second, 1000);
  auto res = r.Reconcile(Alloc({Pod(0, 500, 1000)}), {{Uid(0), Veth(1)}});
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->all_ok());
  EXPECT_EQ(Net(os, 0), kOriginalNet);
  EXPECT_EQ(Net(os, 1).egress_bits_per_second, 1000);
  EXPECT_EQ(journal.Find(Uid(0))->net->interface, Veth(1));
  ASSERT_TRUE(r.ReleaseAll().ok());
  EXPECT_EQ(Net(os, 1), kOriginalNet);
}

TEST(ReconcilerTest, UnjournalableOriginalsChangeNothing) {
  TempDir dir;
  MemoryNodeOs os;
  AddPods(os, 1);
  auto journal = Journal::Open(dir.path() + "/no-such-dir/journal.json");
  ASSERT_TRUE(journal.ok());
  Reconciler r(os, *journal, NoSleep());
  auto res = r.Reconcile(Alloc({Pod(0, 500)}), {});
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(os.cpu_writes(), 0);
}

// The same scenarios through the fault-injecting NodeOs: with random transient faults on
// every method the agent still converges, and refusals still change nothing.
TEST(ReconcilerTest, RandomTransientFaultsStillConvergeAndRefusalsChangeNothing) {
  MemoryNodeOs mem;
  AddPods(mem, 3);
  FaultyNodeOs os(&mem);
  uint64_t seed = 1;
  for (auto m : {NodeOsMethod::kCgroupExists, NodeOsMethod::kReadCpu, NodeOsMethod::kWriteCpu,
                 NodeOsMethod::kInterfaceExists, NodeOsMethod::kReadNet, NodeOsMethod::kWriteNet}) {
    os.FailWithProbability(m, 0.2, Status::Unavailable("flaky"), seed++);
  }
  Journal journal = Journal::InMemory();
  ReconcilerOptions opts = NoSleep();
  opts.max_attempts = 20;
  Reconciler r(os, journal, opts);

  api::PodAllocation g = Pod(2, 1000);
  g.guaranteed = true;
  auto refused = r.Reconcile(Alloc({Pod(0, 500), Pod(1, 600), g}), Veths(3));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  api::PodAllocation hostile = Pod(1, 600);
  hostile.uid = "/etc/passwd";
  EXPECT_FALSE(r.Reconcile(Alloc({Pod(0, 500), hostile}), Veths(2)).ok());
  EXPECT_EQ(mem.cpu_writes() + mem.net_writes(), 0);
  EXPECT_EQ(journal.writes(), 0);

  auto res = r.Reconcile(Alloc({Pod(0, 500, 8000), Pod(1, 600), Pod(2, 0)}), Veths(3));
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_TRUE(res->all_ok());
  EXPECT_GT(os.injected_failures(), 0);
  EXPECT_EQ(Cpu(mem, 0).quota_us, 50000);
  EXPECT_EQ(Net(mem, 0).egress_bits_per_second, 8000);
  auto removed = r.Reconcile(Alloc({}), {});
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed->all_ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Cpu(mem, i), kOriginalCpu);
    EXPECT_EQ(Net(mem, i), kOriginalNet);
  }
}

// ---- Interfaces found from the pod's network namespace (NodeOs::PodInterface). ----

TEST(ReconcilerTest, DiscoveredInterfaceIsShapedWithoutAMappingAndRestored) {
  MemoryNodeOs os;
  AddPods(os, 1);
  os.SetPodInterface(Cgroup(0), Veth(0));
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  auto res = r.Reconcile(Alloc({Pod(0, 500, 1'000'000)}));
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_TRUE(res->all_ok());
  EXPECT_EQ(Net(os, 0), (NetLimits{1'000'000, 0, 1}));
  EXPECT_EQ(res->pods[0].interface, Veth(0));
  EXPECT_TRUE(res->pods[0].interface_discovered);
  EXPECT_TRUE(res->pods[0].network_skipped.ok());
  EXPECT_EQ(journal.Find(Uid(0))->net->interface, Veth(0));
  ASSERT_TRUE(r.ReleaseAll().ok());
  EXPECT_EQ(Net(os, 0), kOriginalNet);
}

TEST(ReconcilerTest, MappingOverridesDiscovery) {
  MemoryNodeOs os;
  AddPods(os, 2);
  os.SetPodInterface(Cgroup(0), Veth(1));
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  auto res = r.Reconcile(Alloc({Pod(0, 500, 1'000'000)}), {{Uid(0), Veth(0)}});
  ASSERT_TRUE(res.ok() && res->all_ok()) << res.status();
  EXPECT_EQ(Net(os, 0).egress_bits_per_second, 1'000'000);
  EXPECT_EQ(os.net_writes(Veth(1)), 0);
  EXPECT_FALSE(res->pods[0].interface_discovered);
  EXPECT_EQ(os.pod_interface_calls(), 0);
}

TEST(ReconcilerTest, PodWithoutBandwidthAllocationIsNotProbed) {
  MemoryNodeOs os;
  AddPods(os, 1);
  os.SetPodInterface(Cgroup(0), Veth(0));
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  ASSERT_TRUE(r.Reconcile(Alloc({Pod(0, 500)})).ok());
  EXPECT_EQ(os.pod_interface_calls(), 0);
  EXPECT_EQ(os.net_writes(), 0);
}

TEST(ReconcilerTest, HostNetworkPodIsSkippedWithItsReasonAndNoInterfaceIsTouched) {
  MemoryNodeOs os;
  AddPods(os, 1);
  os.AddInterface("eth0");
  os.SetPodInterface(Cgroup(0), Status::FailedPrecondition("host network"));
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  auto res = r.Reconcile(Alloc({Pod(0, 500, 1'000'000)}));
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_TRUE(res->all_ok()) << "a skipped network does not fail the pod";
  EXPECT_EQ(res->pods[0].action, PodAction::kApplied) << "its CPU is applied";
  EXPECT_EQ(Cpu(os, 0).quota_us, 50000);
  EXPECT_EQ(res->pods[0].network_skipped.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(res->pods[0].network_skipped.message().find("host network"), std::string::npos);
  EXPECT_EQ(res->pods[0].interface, "");
  EXPECT_EQ(os.net_writes(), 0);
  EXPECT_EQ(journal.Find(Uid(0))->net, std::nullopt);
}

TEST(ReconcilerTest, PodWithoutAProcessYetIsShapedOnALaterPass) {
  MemoryNodeOs os;
  AddPods(os, 1);
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  const auto alloc = Alloc({Pod(0, 500, 1'000'000)});
  auto first = r.Reconcile(alloc);
  ASSERT_TRUE(first.ok() && first->all_ok());
  EXPECT_EQ(first->pods[0].network_skipped.code(), StatusCode::kNotFound);
  EXPECT_EQ(os.net_writes(), 0);
  os.SetPodInterface(Cgroup(0), Veth(0));
  auto second = r.Reconcile(alloc);
  ASSERT_TRUE(second.ok() && second->all_ok());
  EXPECT_TRUE(second->pods[0].network_skipped.ok());
  EXPECT_EQ(Net(os, 0).egress_bits_per_second, 1'000'000);
}

TEST(ReconcilerTest, LostDiscoveryLeavesTheJournalledInterfaceAsItIs) {
  MemoryNodeOs os;
  AddPods(os, 1);
  os.SetPodInterface(Cgroup(0), Veth(0));
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  const auto alloc = Alloc({Pod(0, 500, 1'000'000)});
  ASSERT_TRUE(r.Reconcile(alloc).ok());
  const int64_t writes = os.net_writes();
  os.SetPodInterface(Cgroup(0), Status::NotFound("no process in cgroup"));
  auto res = r.Reconcile(alloc);
  ASSERT_TRUE(res.ok() && res->all_ok());
  EXPECT_FALSE(res->pods[0].network_skipped.ok());
  EXPECT_EQ(res->pods[0].interface, Veth(0));
  EXPECT_EQ(Net(os, 0).egress_bits_per_second, 1'000'000) << "neither restored nor rewritten";
  EXPECT_EQ(os.net_writes(), writes);
  ASSERT_NE(journal.Find(Uid(0)), nullptr);
  EXPECT_EQ(journal.Find(Uid(0))->net->interface, Veth(0));
  // Gone from the allocation while undiscoverable: the journalled interface is restored.
  ASSERT_TRUE(r.Reconcile(Alloc({})).ok());
  EXPECT_EQ(Net(os, 0), kOriginalNet);
}

TEST(ReconcilerTest, InterfaceFoundForTwoPodsShapesOnlyTheFirst) {
  MemoryNodeOs os;
  AddPods(os, 2);
  os.SetPodInterface(Cgroup(0), Veth(0));
  os.SetPodInterface(Cgroup(1), Veth(0));
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  auto res = r.Reconcile(Alloc({Pod(0, 500, 1'000'000), Pod(1, 500, 2'000'000)}));
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_TRUE(res->pods[0].network_skipped.ok());
  EXPECT_EQ(res->pods[1].network_skipped.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Net(os, 0).egress_bits_per_second, 1'000'000);
  EXPECT_EQ(os.net_writes(), 1);
}

TEST(ReconcilerTest, TransientDiscoveryErrorsAreRetried) {
  MemoryNodeOs mem;
  AddPods(mem, 1);
  mem.SetPodInterface(Cgroup(0), Veth(0));
  FaultyNodeOs os(&mem);
  os.FailNext(NodeOsMethod::kPodInterface, Status::Unavailable("netlink busy"), 2);
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal, NoSleep());
  auto res = r.Reconcile(Alloc({Pod(0, 500, 1'000'000)}));
  ASSERT_TRUE(res.ok() && res->all_ok());
  EXPECT_TRUE(res->pods[0].network_skipped.ok()) << res->pods[0].network_skipped;
  EXPECT_EQ(Net(mem, 0).egress_bits_per_second, 1'000'000);
  EXPECT_EQ(os.calls(NodeOsMethod::kPodInterface), 3);
}

}  // namespace
}  // namespace star::agent
