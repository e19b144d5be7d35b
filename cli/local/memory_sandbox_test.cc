// The sandbox and the runtime's policies on a MemoryHost: what `star local` asks of the
// host, checked without root.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "local/injector.h"
#include "local/memory_host.h"
#include "local/real_host.h"
#include "local/reallocation.h"
#include "local/sandbox.h"
#include "star/agent/real_node_os.h"

namespace star::local {
namespace {

SandboxOptions Options(const std::string& name, int slots, bool network) {
  SandboxOptions o;
  o.name = name;
  o.slots = slots;
  o.network = network;
  return o;
}

const std::set<std::string> kRootOnly = {"star-local"};

Injection Inject(const std::string& text) {
  auto in = ParseInjection(text);
  EXPECT_TRUE(in.ok()) << in.status();
  return *in;
}

TEST(MemorySandbox, CreateMakesCgroupsAndABridgedNetworkAndTeardownRemovesAll) {
  MemoryHost host;
  auto sb = Sandbox::Create(Options("mem", 2, true), host);
  ASSERT_TRUE(sb.ok()) << sb.status();
  Sandbox& s = **sb;
  const std::vector<std::string> cgroups = host.cgroups();
  for (const std::string& cg : {s.job_cgroup(), s.eval_cgroup(), s.main_cgroup(1),
                                s.neighbor_cgroup(1)}) {
    EXPECT_NE(std::find(cgroups.begin(), cgroups.end(), cg), cgroups.end()) << cg;
  }
  EXPECT_TRUE(host.LinkExists(s.bridge_ifname()));
  EXPECT_TRUE(host.LinkExists(s.host_ifname(1)));
  EXPECT_EQ(host.Namespaces().size(), 2u);
  EXPECT_EQ(host.calls("BringUp " + s.netns(0)).size(), 1u);

  ASSERT_TRUE(host.WriteNet(s.host_ifname(0), {8000000, 8000000, 0}).ok());
  EXPECT_TRUE(host.LinkExists(agent::IfbName(s.host_ifname(0))));
  ASSERT_TRUE(s.Teardown().ok());
  EXPECT_TRUE(host.empty_except(kRootOnly)) << host.Links().size();
}

TEST(MemorySandbox, AFailedCreateLeavesNothingBehind) {
  MemoryHost host;
  host.FailNext("CreateVeth", Status::Internal("veth: no"));
  auto sb = Sandbox::Create(Options("fail", 3, true), host);
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.status().code(), StatusCode::kInternal);
  EXPECT_NE(sb.status().message().find("sandbox network, slot 0"), std::string::npos)
      << sb.status();
  EXPECT_TRUE(host.empty_except(kRootOnly));
  // The name is free again.
  auto again = Sandbox::Create(Options("fail", 1, false), host);
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(MemorySandbox, TeardownKillsTheProcessesLeftInTheJobsCgroups) {
  MemoryHost host;
  auto sb = Sandbox::Create(Options("procs", 1, false), host);
  ASSERT_TRUE(sb.ok()) << sb.status();
  host.AddProcess((*sb)->neighbor_cgroup(0), 999999);
  ASSERT_TRUE((*sb)->Teardown().ok());
  EXPECT_EQ(host.calls("Kill 999999").size(), 1u);
  EXPECT_TRUE(host.empty_except(kRootOnly));
}

TEST(MemorySandbox, SweepRemovesTheSandboxOfADeadOwnerOnly) {
  MemoryHost host;
  ASSERT_TRUE(host.CreateCgroup("star-local", false).ok());
  // pid_max is at most 2^22: this owner cannot be alive.
  ASSERT_TRUE(host.CreateCgroup("star-local/gone-99999999", false).ok());
  ASSERT_TRUE(host.CreateCgroup("star-local/gone-99999999/slot0", false).ok());
  const std::string alive = "star-local/alive-" + std::to_string(::getpid());
  ASSERT_TRUE(host.CreateCgroup(alive, false).ok());
  auto removed = SweepStaleSandboxes(host, "star-local");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  EXPECT_EQ(host.cgroups(), (std::vector<std::string>{"star-local", alive}));
}

TEST(MemorySandbox, DelayWithoutNetemIsUnavailableSayingSo) {
  MemoryHost host(agent::CgroupVersion::kV1, /*netem=*/false);
  auto sb = Sandbox::Create(Options("delay", 1, true), host);
  ASSERT_TRUE(sb.ok()) << sb.status();
  Status st = (*sb)->SetDelay(0, 0.05);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("CONFIG_NET_SCH_NETEM"), std::string::npos) << st;
}

// ---- injections ----

struct InjectorRig {
  explicit InjectorRig(bool netem = true) : host(agent::CgroupVersion::kV1, netem) {}

  MemoryHost host;
  std::unique_ptr<Sandbox> sandbox;
  std::vector<std::string> events;
  std::vector<std::string> notices;
  int started = 0, stopped = 0;

  std::unique_ptr<Injector> Make(const std::vector<Injection>& injections, bool network = true) {
    auto sb = Sandbox::Create(Options("inj", 4, network), host);  // slot 3: the peer
    EXPECT_TRUE(sb.ok()) << sb.status();
    sandbox = std::move(*sb);
    InjectorOptions o;
    o.sandbox = sandbox.get();
    o.servers = 1;
    o.workers = 2;
    o.worker_millicores = 1000;
    o.peer_slot = 3;
    o.start_neighbor = [this](const Injection& in) -> StatusOr<std::vector<int>> {
      if (in.kind == InjectionKind::kNeighbor) return std::vector<int>{started++};
      return std::vector<int>{started++, started++};  // a bwneighbor's sink and sender
    };
    o.stop_neighbor = [this](int) { ++stopped; };
    o.event = [this](RunEvent e) { events.push_back(e.event + " " + std::to_string(e.worker)); };
    o.notice = [this](const std::string& s) { notices.push_back(s); };
    return std::make_unique<Injector>(o, injections);
  }
};

TEST(Injector, ANeighborAtStart5sWritesTheNeighborsCpuShareThenAndLiftsAtItsEnd) {
  InjectorRig rig;
  auto inj = rig.Make({Inject("worker=1,neighbor=3,start=5s,end=9s")});
  const std::string neighbor = rig.sandbox->neighbor_cgroup(2);  // server first: slot 2
  ASSERT_TRUE(inj->Tick(4.9).ok());
  EXPECT_FALSE(rig.host.cpu(neighbor).has_value());
  EXPECT_EQ(rig.started, 0);
  ASSERT_TRUE(inj->Tick(5.0).ok());
  EXPECT_EQ(rig.host.cpu(neighbor), (agent::CpuLimits{-1, kCfsPeriodUs, 300}));
  EXPECT_EQ(rig.started, 1);
  EXPECT_EQ(rig.events, (std::vector<std::string>{"inject 1"}));
  ASSERT_TRUE(inj->Tick(9.0).ok());
  EXPECT_EQ(rig.stopped, 1);
  EXPECT_EQ(rig.host.cpu(neighbor), (agent::CpuLimits{-1, kCfsPeriodUs, 100}));
  EXPECT_EQ(rig.events, (std::vector<std::string>{"inject 1", "lift 1"}));
}

TEST(Injector, CpuFractionCapsTheSlotAndTheLiftRestoresItsCapacity) {
  InjectorRig rig;
  auto inj = rig.Make({Inject("worker=0,cpu=0.25,end=2s")});
  const std::string slot = rig.sandbox->slot_cgroup(1);
  ASSERT_TRUE(inj->Tick(0).ok());
  EXPECT_EQ(rig.host.cpu(slot), (agent::CpuLimits{QuotaUs(250), kCfsPeriodUs, 100}));
  ASSERT_TRUE(inj->Tick(2).ok());
  EXPECT_EQ(rig.host.cpu(slot), (agent::CpuLimits{QuotaUs(1000), kCfsPeriodUs, 100}));
}

TEST(Injector, BandwidthShapesBothDirectionsOfTheSlotsVeth) {
  InjectorRig rig;
  auto inj = rig.Make({Inject("worker=1,bandwidth=20mbit")});
  ASSERT_TRUE(inj->Tick(0).ok());
  const agent::NetLimits net = rig.host.net(rig.sandbox->host_ifname(2));
  EXPECT_EQ(net.egress_bits_per_second, 20'000'000);
  EXPECT_EQ(net.ingress_bits_per_second, 20'000'000);
}

TEST(Injector, ABwNeighborSharesTheSlotsUplinkWithItsSenderUntilItsEnd) {
  InjectorRig rig;
  auto inj = rig.Make({Inject("worker=1,bwneighbor=800mbit,start=5s,end=9s")});
  const std::string ns = rig.sandbox->netns(2);
  ASSERT_TRUE(inj->Tick(4).ok());
  // From the start every worker's uplink is the link (1gbit by default), nothing else.
  EXPECT_EQ(rig.host.uplink(ns, Sandbox::kSlotIfname), PlainUplink(1'000'000'000));
  EXPECT_EQ(rig.host.uplink(rig.sandbox->netns(1), Sandbox::kSlotIfname), PlainUplink(1'000'000'000));
  EXPECT_EQ(rig.host.uplink(rig.sandbox->netns(3), Sandbox::kSlotIfname), UplinkShare{});
  ASSERT_TRUE(inj->Tick(5).ok());
  EXPECT_EQ(rig.host.uplink(ns, Sandbox::kSlotIfname),
            (UplinkShare{1'000'000'000, 800'000'000, rig.sandbox->slot_address(3)}));
  EXPECT_EQ(rig.started, 2);
  ASSERT_TRUE(inj->Tick(9).ok());
  EXPECT_EQ(rig.stopped, 2);
  EXPECT_EQ(rig.host.uplink(ns, Sandbox::kSlotIfname), PlainUplink(1'000'000'000));
  EXPECT_EQ(rig.events, (std::vector<std::string>{"inject 1", "lift 1"}));
}

TEST(Injector, ABandwidthWithAPeerSharesBothUplinksNamingEachOtherUntilItsEnd) {
  InjectorRig rig;
  auto inj = rig.Make({Inject("worker=0,bandwidth=50mbit,peer=1,start=5s,end=9s")});
  const std::string ns0 = rig.sandbox->netns(1), ns1 = rig.sandbox->netns(2);  // server first
  ASSERT_TRUE(inj->Tick(4).ok());
  EXPECT_EQ(rig.host.uplink(ns0, Sandbox::kSlotIfname), UplinkShare{});
  EXPECT_EQ(rig.host.uplink(ns1, Sandbox::kSlotIfname), UplinkShare{});
  ASSERT_TRUE(inj->Tick(5).ok());
  EXPECT_EQ(rig.host.uplink(ns0, Sandbox::kSlotIfname),
            (UplinkShare{kDefaultLinkBps, 50'000'000, rig.sandbox->slot_address(2)}));
  EXPECT_EQ(rig.host.uplink(ns1, Sandbox::kSlotIfname),
            (UplinkShare{kDefaultLinkBps, 50'000'000, rig.sandbox->slot_address(1)}));
  // Only the one link: the slots' whole veths stay unshaped.
  EXPECT_EQ(rig.host.net(rig.sandbox->host_ifname(1)).egress_bits_per_second, 0);
  EXPECT_EQ(rig.host.net(rig.sandbox->host_ifname(2)).ingress_bits_per_second, 0);
  ASSERT_TRUE(inj->Tick(9).ok());
  EXPECT_EQ(rig.host.uplink(ns0, Sandbox::kSlotIfname), UplinkShare{});
  EXPECT_EQ(rig.host.uplink(ns1, Sandbox::kSlotIfname), UplinkShare{});
  EXPECT_EQ(rig.events, (std::vector<std::string>{"inject 0", "lift 0"}));
}

TEST(Injector, APeerLinkAfterABwNeighborUsesItsLinkAndGivesBackThePlainUplinks) {
  InjectorRig rig;
  auto inj = rig.Make({Inject("worker=0,bwneighbor=100mbit,link=200mbit,end=5s"),
                       Inject("worker=1,bandwidth=20mbit,peer=0,start=5s,end=9s")});
  const std::string ns0 = rig.sandbox->netns(1), ns1 = rig.sandbox->netns(2);
  ASSERT_TRUE(inj->Tick(0).ok());
  EXPECT_EQ(rig.host.uplink(ns1, Sandbox::kSlotIfname), PlainUplink(200'000'000));
  ASSERT_TRUE(inj->Tick(5).ok());
  EXPECT_EQ(rig.host.uplink(ns1, Sandbox::kSlotIfname),
            (UplinkShare{200'000'000, 20'000'000, rig.sandbox->slot_address(1)}));
  EXPECT_EQ(rig.host.uplink(ns0, Sandbox::kSlotIfname),
            (UplinkShare{200'000'000, 20'000'000, rig.sandbox->slot_address(2)}));
  ASSERT_TRUE(inj->Tick(9).ok());
  EXPECT_EQ(rig.host.uplink(ns0, Sandbox::kSlotIfname), PlainUplink(200'000'000));
  EXPECT_EQ(rig.host.uplink(ns1, Sandbox::kSlotIfname), PlainUplink(200'000'000));
}

TEST(Injector, APeerLinkWhosePeerCannotBeShapedLeavesNeitherEndShaped) {
  InjectorRig rig;
  auto inj = rig.Make({Inject("worker=0,bandwidth=50mbit,peer=1")});
  rig.host.FailNext("SetUplinkShare " + rig.sandbox->netns(2), Status::Internal("tc failed"));
  Status st = inj->Tick(0);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("--inject \"worker=0,bandwidth=50mbit,peer=1\""), std::string::npos) << st;
  EXPECT_EQ(rig.host.uplink(rig.sandbox->netns(1), Sandbox::kSlotIfname), UplinkShare{});
  EXPECT_FALSE(inj->injections()[0].applied);
  EXPECT_TRUE(rig.events.empty());
}

TEST(Injector, ABwNeighborWithoutNetworkIsSkippedWithANotice) {
  InjectorRig rig;
  auto inj = rig.Make({Inject("worker=0,bwneighbor=100mbit")}, /*network=*/false);
  ASSERT_TRUE(inj->Tick(0).ok());
  EXPECT_FALSE(inj->injections()[0].available);
  EXPECT_EQ(rig.started, 0);
  ASSERT_EQ(rig.notices.size(), 1u);
}

TEST(Injector, DelayWithoutNetemIsSkippedWithANoticeAndTheRunGoesOn) {
  InjectorRig rig(/*netem=*/false);
  auto inj = rig.Make({Inject("worker=0,delay=20ms")});
  ASSERT_TRUE(inj->Tick(0).ok());
  EXPECT_FALSE(inj->injections()[0].available);
  ASSERT_EQ(rig.notices.size(), 1u);
  EXPECT_NE(rig.notices[0].find("unavailable here"), std::string::npos) << rig.notices[0];
  EXPECT_TRUE(rig.events.empty());
}

TEST(Injector, AFailedWriteIsReturnedNamingTheInjection) {
  InjectorRig rig;
  auto inj = rig.Make({Inject("worker=0,cpu=0.5")});
  rig.host.FailNext("WriteCpu", Status::Internal("cgroup gone"));
  Status st = inj->Tick(0);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("--inject \"worker=0,cpu=0.5\""), std::string::npos) << st;
}

// ---- reallocation ----

// A job of 2 workers behind 1 parameter server; worker 1's slot (2) holds the injected
// neighbor of `text`, applied at t = 0.
struct ReallocationRig {
  explicit ReallocationRig(const std::string& text = "worker=1,neighbor=3,end=30s") {
    injector = rig.Make({Inject(text)});
    EXPECT_TRUE(injector->Tick(0).ok());
    ReallocationContext ctx;
    ctx.job = "inj";
    ctx.workers = 2;
    ctx.servers = 1;
    ctx.worker_millicores = 1000;
    ctx.sandbox = rig.sandbox.get();
    ctx.peer_slot = 3;
    ctx.event = [this](RunEvent e) {
      rig.events.push_back(e.event + " " + std::to_string(e.worker));
    };
    reallocator = std::make_unique<Reallocator>(std::move(ctx));
  }
  // Returns the workers the reallocator had nothing for.
  std::vector<int> Update(int64_t revision, std::vector<op::ResourceNeed> workers, double t = 10) {
    return reallocator->Update({std::move(workers), revision}, t, injector->injections());
  }
  std::optional<agent::CpuLimits> neighbor_cpu() const {
    return rig.host.cpu(rig.sandbox->neighbor_cgroup(2));
  }
  size_t writes() const { return rig.host.calls("WriteCpu").size(); }
  int64_t neighbor_bps() const {
    return rig.host.uplink(rig.sandbox->netns(2), Sandbox::kSlotIfname).neighbor_bps;
  }

  InjectorRig rig;
  std::unique_ptr<Injector> injector;
  std::unique_ptr<Reallocator> reallocator;
};

constexpr op::ResourceNeed kWorker1Compute{1, api::StragglerCause::kCompute, 4.0};

TEST(Reallocation, AComputeNeedCapsTheNeighborBelowItsShareOncePerRevision) {
  ReallocationRig r;
  r.Update(1, {kWorker1Compute});
  const auto cap = r.neighbor_cpu();
  ASSERT_TRUE(cap.has_value());
  EXPECT_GT(cap->quota_us, 0);
  EXPECT_LT(cap->quota_us, QuotaUs(750));  // the neighbor held 750m of the slot's 1000m
  EXPECT_EQ(cap->weight, 300);
  EXPECT_EQ(r.rig.events.back(), "reallocate 1");
  const size_t writes = r.writes();
  r.Update(1, {kWorker1Compute});  // the same revision: nothing to do
  r.Update(2, {{0, api::StragglerCause::kCompute, 3.0}, kWorker1Compute});  // worker 1 unchanged
  EXPECT_EQ(r.writes(), writes);
  EXPECT_EQ(r.rig.events.back(), "reallocate 1");
}

TEST(Reallocation, TheNeighborsGuaranteeIsKept) {
  ReallocationRig r("worker=1,neighbor=3,guarantee=0.6");
  r.Update(1, {kWorker1Compute});
  const auto cap = r.neighbor_cpu();
  ASSERT_TRUE(cap.has_value());
  ASSERT_EQ(r.rig.events.back(), "reallocate 1");
  EXPECT_GE(cap->quota_us, QuotaUs(600));
  EXPECT_LT(cap->quota_us, QuotaUs(750));
}

TEST(Reallocation, TheNeedGoneGivesTheNeighborItsCpuBack) {
  ReallocationRig r;
  r.Update(1, {kWorker1Compute});
  ASSERT_NE(r.neighbor_cpu()->quota_us, -1);
  r.Update(2, {});
  EXPECT_EQ(r.neighbor_cpu(), (agent::CpuLimits{-1, kCfsPeriodUs, 300}));
  EXPECT_EQ(r.rig.events.back(), "reallocate_undone 1");
  // Back in the request later: capped again.
  r.Update(3, {kWorker1Compute});
  EXPECT_NE(r.neighbor_cpu()->quota_us, -1);
  EXPECT_EQ(r.rig.events.back(), "reallocate 1");
}

TEST(Reallocation, NoComputeNeedBesideANeighborWritesNothing) {
  ReallocationRig r;
  const size_t writes = r.writes();
  r.Update(0, {});
  r.Update(1, {{0, api::StragglerCause::kCompute, 4.0}});  // worker 0 has no neighbor
  r.Update(2, {{1, api::StragglerCause::kCommunication, 4.0}});  // a neighbor holds no bandwidth
  r.Update(3, {});
  EXPECT_EQ(r.writes(), writes);
  EXPECT_EQ(r.rig.events, (std::vector<std::string>{"inject 1"}));
}

constexpr op::ResourceNeed kWorker1Communication{1, api::StragglerCause::kCommunication, 2.0};

TEST(Reallocation, ACommunicationNeedTakesTheBwNeighborsRateDownToItsGuarantee) {
  ReallocationRig r("worker=1,bwneighbor=800mbit,guarantee=100mbit");
  ASSERT_EQ(r.neighbor_bps(), 800'000'000);
  // A compute need: no bandwidth to give for it, and the loop is told so.
  EXPECT_EQ(r.Update(1, {kWorker1Compute}), std::vector<int>{1});
  EXPECT_EQ(r.neighbor_bps(), 800'000'000);
  EXPECT_TRUE(r.Update(2, {kWorker1Communication}).empty());
  EXPECT_EQ(r.rig.events.back(), "reallocate 1");
  EXPECT_EQ(r.neighbor_bps(), 100'000'000);  // never below its guarantee
  r.Update(3, {});
  EXPECT_EQ(r.rig.events.back(), "reallocate_undone 1");
  EXPECT_EQ(r.neighbor_bps(), 800'000'000);
}

TEST(Reallocation, ABwNeighborWithoutAGuaranteeKeepsTheLeastTheRuleAllows) {
  ReallocationRig r("worker=1,bwneighbor=800mbit");
  r.Update(1, {kWorker1Communication});
  EXPECT_EQ(r.rig.events.back(), "reallocate 1");
  EXPECT_EQ(r.neighbor_bps(), 1'000'000);  // PlannerOptions::min_allocation's 1 Mbit/s
}

// A hard slow link: no co-located sender to cap, so the need is reported unmet and the
// loop does not wait for a reallocation that cannot come.
TEST(Reallocation, ACommunicationNeedWithoutABwNeighborIsUnmet) {
  ReallocationRig r("worker=1,bandwidth=200mbit");
  EXPECT_EQ(r.Update(1, {kWorker1Communication, {0, api::StragglerCause::kCompute, 2.0}}),
            (std::vector<int>{1, 0}));
  EXPECT_TRUE(r.Update(1, {kWorker1Communication}).empty()) << "a revision already acted on";
  EXPECT_EQ(r.rig.events, (std::vector<std::string>{"inject 1"}));
}

TEST(Reallocation, ALiftedNeighborIsNotUncappedAgain) {
  ReallocationRig r;
  r.Update(1, {kWorker1Compute});
  ASSERT_TRUE(r.injector->Tick(30).ok());  // the lift writes the neighbor's cgroup itself
  const size_t writes = r.writes();
  r.Update(2, {});
  EXPECT_EQ(r.writes(), writes);
  EXPECT_EQ(r.rig.events.back(), "lift 1");
}

// ---- cgroup version ----

TEST(CgroupLayout, HybridMachineWithoutCpuInCgroup2UsesV1CpuAndCpuacct) {
  const std::string mounts =
      "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
      "cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0\n"
      "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
  auto layout = ChooseCgroupLayout(mounts, [](const std::string&) { return std::string(); });
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->version, agent::CgroupVersion::kV1);
  EXPECT_EQ(layout->mounts,
            (std::vector<std::string>{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct"}));
}

TEST(CgroupLayout, Cgroup2WithTheCpuControllerIsChosen) {
  const std::string mounts = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
  auto layout = ChooseCgroupLayout(mounts, [](const std::string& path) {
    return path == "/sys/fs/cgroup/cgroup.controllers" ? std::string("cpuset cpu io memory pids\n")
                                                       : std::string();
  });
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->version, agent::CgroupVersion::kV2);
  EXPECT_EQ(layout->mounts, (std::vector<std::string>{"/sys/fs/cgroup"}));
}

TEST(CgroupLayout, NoCpuHierarchyIsFailedPrecondition) {
  auto layout = ChooseCgroupLayout("proc /proc proc rw 0 0\n",
                                   [](const std::string&) { return std::string(); });
  EXPECT_EQ(layout.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace star::local
