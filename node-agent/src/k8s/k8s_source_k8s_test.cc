// K8sSource against the real API server (star/test_support/kube_cluster.h), through
// star-faultproxy, with the agent's real Reconciler on a MemoryNodeOs: creating, updating,
// breaking and deleting this node's NodeAllocation, and watches that drop or expire. Each test drives the agent's loop
// (poll, reconcile or release, report status) by hand until the state it expects shows,
// within a bounded deadline; the source wakes the loop when the watch delivers.
#include "star/agent/k8s_source.h"

#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "k8s_test_util.h"
#include "star/test_support/kube_cluster.h"
#include "star/agent/headroom_reporter.h"
#include "star/agent/journal.h"
#include "star/agent/memory_node_os.h"
#include "star/agent/reconciler.h"
#include "star/kube/client.h"

namespace star::agent {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kUid[] = "7a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d";
const std::string kCgroup = std::string("kubepods/burstable/pod") + kUid;
const CpuLimits kOriginal{200000, 100000, 100};

// The test's node is named after its namespace: a name no other test uses for the
// cluster-scoped NodeAllocation.
class K8sSourceTest : public test_support::KubeClusterTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(KubeClusterTest::SetUp());
    if (IsSkipped()) return;
    node_ = ns_;
    UseFaultProxy();
  }

  json Allocation(int64_t quota_millicores) const {
    return star::agent::testing::OneWorkerAllocation(node_, kUid, quota_millicores);
  }

  // Faults (star-faultproxy rules), when given, are active before the source's first
  // request. `max_retries`: the client's own retries (0: every failed request reaches the
  // source).
  void Start(const std::vector<json>& faults = {}, int max_retries = 5) {
    for (const json& rule : faults) ASSERT_NO_FATAL_FAILURE(AddFault(rule));
    kube::ClientOptions client_options = Options();
    client_options.max_retries = max_retries;
    auto client = kube::Client::Create(client_options);
    ASSERT_TRUE(client.ok()) << client.status();
    source_client_ = std::move(client).value();
    os_.AddCgroup(kCgroup, kOriginal);
    ReconcilerOptions r;
    r.sleep = [](std::chrono::milliseconds) {};
    reconciler_ = std::make_unique<Reconciler>(os_, journal_, r);
    K8sSourceOptions s;
    s.initial_backoff = 10ms;
    s.max_backoff = 200ms;
    source_ = std::make_unique<K8sSource>(*source_client_, node_, s);
    source_->Start();
  }
  void TearDown() override {
    if (source_) source_->Stop();
    source_.reset();
    source_client_.reset();
    if (!node_.empty()) {
      auto admin = kube::Client::Create(admin_);
      ASSERT_TRUE(admin.ok()) << admin.status();
      const Status deleted = (*admin)->Delete(kube::NodeAllocations(), "", node_);
      EXPECT_TRUE(deleted.ok() || deleted.code() == StatusCode::kNotFound) << deleted;
    }
    KubeClusterTest::TearDown();
  }

  // One pass of star-agent's loop; returns what Poll said.
  Status Pass() {
    auto polled = source_->Poll();
    std::optional<StatusOr<ReconcileResult>> r;
    if (source_->desired()) {
      r = reconciler_->Reconcile(source_->desired()->allocation, source_->desired()->interfaces);
    } else if (source_->released()) {
      r = reconciler_->ReleaseAll();
    }
    EXPECT_TRUE(source_->ReportStatus(r ? &*r : nullptr).ok());
    return polled.status();
  }
  // Runs passes until `done` holds; false if it does not within 20 s.
  bool RunUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      const Status polled = Pass();
      if (done()) return true;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        ADD_FAILURE() << "last poll: " << polled << "; desired " << source_->desired().has_value()
                      << ", released " << source_->released() << "; object " << Get().dump()
                      << "; proxy " << proxy_->Traffic().dump();
        return false;
      }
      // Woken by the watch; the bound only makes room for a status read-back to change.
      source_->WaitForUpdate(std::chrono::duration_cast<std::chrono::milliseconds>(
          std::min<std::chrono::steady_clock::duration>(deadline - now, 50ms)));
    }
  }
  // Runs passes while the watch keeps delivering (our own status writes); bounded.
  void Drain() {
    for (int i = 0; i < 20 && source_->WaitForUpdate(200ms); ++i) (void)Pass();
  }

  json Get() {
    auto o = client_->Get(kube::NodeAllocations(), "", node_);
    return o.ok() ? *o : json();
  }
  int64_t ObservedGeneration() {
    return Get().value(json::json_pointer("/status/observedGeneration"), int64_t{-1});
  }
  std::string Condition(const std::string& type, const std::string& field = "status") {
    const json o = Get();
    for (const json& c : o.value(json::json_pointer("/status/conditions"), json::array())) {
      if (c.value("type", "") == type) return c.value(field, "");
    }
    return "";
  }
  int64_t QuotaUs() {
    auto c = os_.ReadCpu(kCgroup);
    return c.ok() ? c->quota_us : -2;
  }

  std::string node_;
  std::unique_ptr<kube::Client> source_client_;
  MemoryNodeOs os_;
  Journal journal_ = Journal::InMemory();
  std::unique_ptr<Reconciler> reconciler_;
  std::unique_ptr<K8sSource> source_;
};

TEST_F(K8sSourceTest, CreateAppliesLimitsAndUpdateMovesObservedGeneration) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(source_->WaitForSync(20s));
  (void)Pass();
  EXPECT_TRUE(source_->released()) << "no object yet: nothing to keep";
  EXPECT_EQ(QuotaUs(), kOriginal.quota_us);

  ASSERT_TRUE(client_->Create(kube::NodeAllocations(), "", Allocation(500)).ok());
  ASSERT_TRUE(RunUntil([&] { return QuotaUs() == 50000 && ObservedGeneration() == 1; }))
      << "quota " << QuotaUs() << ", observedGeneration " << ObservedGeneration();
  EXPECT_EQ(Condition("Ready"), "True");
  EXPECT_EQ(Condition("Applied"), "True");
  EXPECT_EQ(Condition("Valid"), "True");
  const json applied = Get()["status"]["applied"];
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0]["uid"], kUid);
  EXPECT_EQ(applied[0]["cpu"]["quotaMillicores"], 500);

  ASSERT_TRUE(client_
                  ->MergePatch(kube::NodeAllocations(), "", node_,
                               {{"spec", Allocation(250)["spec"]}})
                  .ok());
  ASSERT_TRUE(RunUntil([&] { return QuotaUs() == 25000 && ObservedGeneration() == 2; }))
      << "quota " << QuotaUs() << ", observedGeneration " << ObservedGeneration();
  EXPECT_EQ(Get()["status"]["applied"][0]["cpu"]["quotaMillicores"], 250);

  // Our own status writes come back as MODIFIED events; none of them makes another write.
  Drain();
  EXPECT_EQ(source_->status_writes(), 2) << "one status write per change";
}

TEST_F(K8sSourceTest, BandwidthGoesToTheDiscoveredInterfaceWithNoAnnotation) {
  ASSERT_NO_FATAL_FAILURE(Start());
  os_.AddInterface("vethpod0");
  json alloc = Allocation(500);
  alloc["spec"]["pods"][0]["network"] = {{"egressBitsPerSecond", 8000000}, {"priority", 1}};
  ASSERT_TRUE(client_->Create(kube::NodeAllocations(), "", alloc).ok());
  // No process in the pod yet: CPU applied, shaping skipped with the reason, retried.
  ASSERT_TRUE(RunUntil([&] { return Condition("NetworkShaped") == "False"; }));
  EXPECT_EQ(Condition("NetworkShaped", "reason"), "InterfaceNotFound");
  EXPECT_NE(Condition("NetworkShaped", "message").find("ns/worker-0"), std::string::npos);
  EXPECT_EQ(Condition("Applied"), "True");
  EXPECT_EQ(QuotaUs(), 50000);
  EXPECT_EQ(os_.net_writes(), 0);

  os_.SetPodInterface(kCgroup, std::string("vethpod0"));
  ASSERT_TRUE(RunUntil([&] { return Condition("NetworkShaped") == "True"; }));
  EXPECT_EQ(os_.ReadNet("vethpod0")->egress_bits_per_second, 8000000);
  EXPECT_EQ(Get()["status"]["applied"][0]["network"]["egressBitsPerSecond"], 8000000);
  EXPECT_EQ(Get().value(json::json_pointer("/metadata/annotations"), json::object()), json::object())
      << "nothing names the interface";
}

TEST_F(K8sSourceTest, InvalidObjectSetsValidFalseAndChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(client_->Create(kube::NodeAllocations(), "", Allocation(500)).ok());
  ASSERT_TRUE(RunUntil([&] { return QuotaUs() == 50000 && ObservedGeneration() == 1; }));
  const int64_t writes = os_.cpu_writes();

  // The CRD schema does not look at annotations; the agent refuses a hostile interface.
  const std::string key = std::string("ifname.star.dev/") + kUid;
  json bad = Allocation(100);
  bad["metadata"]["annotations"] = {{key, "veth/evil"}};
  ASSERT_TRUE(client_->MergePatch(kube::NodeAllocations(), "", node_, bad).ok());
  ASSERT_TRUE(RunUntil([&] { return Condition("Valid") == "False"; }));
  const std::string message = Condition("Valid", "message");
  EXPECT_NE(message.find("metadata.annotations[\"" + key + "\"]"), std::string::npos) << message;
  EXPECT_EQ(Condition("Valid", "reason"), "InvalidSpec");
  EXPECT_EQ(Condition("Ready"), "False");
  EXPECT_EQ(ObservedGeneration(), 1) << "the last good spec stays in force";
  EXPECT_EQ(QuotaUs(), 50000);
  EXPECT_EQ(os_.cpu_writes(), writes);
  const Status polled = Pass();
  EXPECT_EQ(polled.code(), StatusCode::kInvalidArgument);

  // Fixed: the new spec applies.
  json fixed = Allocation(100);
  fixed["metadata"]["annotations"] = {{key, nullptr}};
  ASSERT_TRUE(client_->MergePatch(kube::NodeAllocations(), "", node_, fixed).ok());
  ASSERT_TRUE(RunUntil([&] { return Condition("Valid") == "True" && QuotaUs() == 10000; }));
  EXPECT_EQ(Condition("Ready"), "True");
}

TEST_F(K8sSourceTest, DeletionRestoresOriginals) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(client_->Create(kube::NodeAllocations(), "", Allocation(500)).ok());
  ASSERT_TRUE(RunUntil([&] { return QuotaUs() == 50000; }));
  ASSERT_NE(journal_.Find(kUid), nullptr);

  ASSERT_TRUE(client_->Delete(kube::NodeAllocations(), "", node_).ok());
  ASSERT_TRUE(RunUntil([&] { return QuotaUs() == kOriginal.quota_us; }));
  EXPECT_TRUE(source_->released());
  EXPECT_FALSE(source_->desired().has_value());
  EXPECT_EQ(journal_.Find(kUid), nullptr);
  auto cpu = os_.ReadCpu(kCgroup);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(*cpu, kOriginal);
}

TEST_F(K8sSourceTest, HeadroomIsWrittenWholeAndKeptByStatusWrites) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(source_->WaitForSync(20s));
  (void)Pass();
  const api::NodeHeadroom h{"2026-01-01T00:00:05Z", 5.5, 8000, 1500.5, "eth0", 1e10, 2e8, 3e7};
  EXPECT_TRUE(source_->ReportHeadroom(h).ok()) << "no object yet: nothing to write to";
  EXPECT_EQ(source_->headroom_writes(), 0);

  ASSERT_TRUE(client_->Create(kube::NodeAllocations(), "", Allocation(500)).ok());
  ASSERT_TRUE(RunUntil([&] { return ObservedGeneration() == 1; }));
  ASSERT_TRUE(source_->ReportHeadroom(h).ok());
  EXPECT_EQ(source_->headroom_writes(), 1);
  // The CRD's schema keeps every field (the API server prunes what it does not know).
  EXPECT_EQ(Get()["status"]["headroom"], api::ToJson(h)) << Get().dump();

  // A new spec makes a status write, which leaves the headroom as it was.
  ASSERT_TRUE(client_
                  ->MergePatch(kube::NodeAllocations(), "", node_,
                               {{"spec", Allocation(250)["spec"]}})
                  .ok());
  ASSERT_TRUE(RunUntil([&] { return ObservedGeneration() == 2; }));
  auto decoded = api::NodeAllocationFromJson(Get());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->status.headroom, h);
}

TEST_F(K8sSourceTest, TheReporterSamplesThisMachineAndWritesItsHeadroom) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(client_->Create(kube::NodeAllocations(), "", Allocation(500)).ok());
  ASSERT_TRUE(RunUntil([&] { return ObservedGeneration() == 1; }));
  HeadroomConfig config;
  config.interface = "lo";
  config.nic_capacity_bits_per_second = 1e9;
  config.options.interval = 1ms;
  HeadroomReporter reporter(config);
  // The first tick only reads; a later one, an interval on, samples and writes.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (source_->headroom_writes() == 0 && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(reporter.Tick(*source_).ok());
  }
  ASSERT_EQ(source_->headroom_writes(), 1);
  ASSERT_TRUE(reporter.sample().has_value());
  auto decoded = api::NodeAllocationFromJson(Get());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_TRUE(decoded->status.headroom.has_value()) << Get().dump();
  EXPECT_EQ(*decoded->status.headroom, *reporter.sample());
  EXPECT_EQ(decoded->status.headroom->interface, "lo");
  EXPECT_EQ(decoded->status.headroom->cpu_capacity_millicores,
            1000.0 * sysconf(_SC_NPROCESSORS_ONLN));
}

TEST_F(K8sSourceTest, ConvergesThroughExpiredDroppedWatchesAndFailedLists) {
  // The first watch is told its resourceVersion expired (410), the re-list that follows
  // fails once, and every later watch stream is cut after one event.
  const json gone = {{"verb", "watch"}, {"resource", "nodeallocations"}, {"status", 410}, {"count", 1}};
  const json drop = {{"verb", "watch"}, {"resource", "nodeallocations"}, {"dropWatchAfterEvents", 1}};
  const json list_fails = {{"verb", "list"}, {"resource", "nodeallocations"}, {"status", 500}, {"count", 1}};
  ASSERT_NO_FATAL_FAILURE(Start({gone, drop, list_fails}, /*max_retries=*/0));

  ASSERT_TRUE(client_->Create(kube::NodeAllocations(), "", Allocation(500)).ok());
  ASSERT_TRUE(RunUntil([&] { return QuotaUs() == 50000 && ObservedGeneration() == 1; }));
  for (int64_t q : {300, 700, 200}) {
    json patch = {{"spec", Allocation(q)["spec"]}};
    ASSERT_TRUE(client_->MergePatch(kube::NodeAllocations(), "", node_, patch).ok());
    ASSERT_TRUE(RunUntil([&] { return QuotaUs() == q * 100; })) << q << ": " << QuotaUs();
  }
  ASSERT_TRUE(RunUntil([&] { return ObservedGeneration() == 4; }));
  const json rules = proxy_->Rules();
  ASSERT_EQ(rules.size(), 3u) << rules;
  EXPECT_EQ(rules[0].value("applied", 0), 1) << "the 410 fired: " << rules;
  EXPECT_GE(rules[1].value("applied", 0), 1) << "a watch was dropped: " << rules;
  EXPECT_EQ(rules[2].value("applied", 0), 1) << "the failed list fired: " << rules;
}

TEST_F(K8sSourceTest, PollReportsTheListErrorUntilAListSaysTheObjectIsAbsent) {
  const json forbidden = {{"verb", "list"}, {"resource", "nodeallocations"}, {"status", 403}};
  ASSERT_NO_FATAL_FAILURE(Start({forbidden}, /*max_retries=*/0));
  ASSERT_TRUE(source_->WaitForUpdate(20s));
  const auto polled = source_->Poll();
  ASSERT_FALSE(polled.ok());
  EXPECT_EQ(polled.status().code(), StatusCode::kFailedPrecondition) << polled.status();
  EXPECT_NE(polled.status().message().find("listing nodeallocation " + node_), std::string::npos)
      << polled.status();
  EXPECT_FALSE(source_->desired().has_value()) << "nothing known yet";
  EXPECT_FALSE(source_->released()) << "nothing known yet";

  // Lists work again; the one that succeeds says there is no object.
  proxy_->Clear();
  ASSERT_TRUE(RunUntil([&] { return source_->released(); }));
  EXPECT_TRUE(source_->Poll().ok()) << "a successful list clears the error";
  EXPECT_EQ(QuotaUs(), kOriginal.quota_us);
}

}  // namespace
}  // namespace star::agent
