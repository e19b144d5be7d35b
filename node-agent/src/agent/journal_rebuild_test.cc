#include "star/agent/journal_rebuild.h"

#include <algorithm>
#include <map>
#include <optional>

#include <gtest/gtest.h>

#include "star/agent/faulty_node_os.h"
#include "star/agent/memory_node_os.h"
#include "star/agent/quantity.h"
#include "star/agent/reconciler.h"

namespace star::agent {
namespace {

constexpr char kUid[] = "0a1b2c3d-0000-4000-8000-000000000001";
constexpr char kUid2[] = "0a1b2c3d-0000-4000-8000-000000000002";
const std::string kBurstable = std::string("kubepods/burstable/pod") + kUid;

TEST(JournalRebuildTest, PodOriginalsAreTheSumOfTheirContainers) {
  MemoryNodeOs os;
  os.AddCgroup(kBurstable, CpuLimits{30000, 100000, 10});  // throttled by the agent
  os.AddCgroup(kBurstable + "/c1", CpuLimits{100000, 100000, 50});
  os.AddCgroup(kBurstable + "/c2", CpuLimits{25000, 50000, 30});  // other period: 50000 at 100 ms
  auto rebuilt = RebuildOriginals(os, CgroupDriver::kCgroupfs, "");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  ASSERT_EQ(rebuilt->size(), 1u);
  const JournalEntry& e = rebuilt->at(kUid);
  ASSERT_TRUE(e.cpu.has_value());
  EXPECT_EQ(e.cpu->cgroup, kBurstable);
  EXPECT_EQ(e.cpu->limits, (CpuLimits{150000, 100000, 80}));
  EXPECT_FALSE(e.net.has_value());
}

TEST(JournalRebuildTest, AContainerWithoutAQuotaMeansUnlimited) {
  MemoryNodeOs os;
  const std::string pod = std::string("kubepods/pod") + kUid;  // Guaranteed, cgroupfs
  os.AddCgroup(pod, CpuLimits{30000, 100000, 100});
  os.AddCgroup(pod + "/sandbox", CpuLimits{-1, 100000, 1});
  os.AddCgroup(pod + "/c1", CpuLimits{200000, 100000, 99});
  auto rebuilt = RebuildOriginals(os, CgroupDriver::kCgroupfs, "");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  ASSERT_EQ(rebuilt->count(kUid), 1u);
  EXPECT_EQ(rebuilt->at(kUid).cpu->limits, (CpuLimits{-1, 100000, 100}));
}

TEST(JournalRebuildTest, PodsShowingTheirOwnLimitsOrWithoutChildrenAreLeftOut) {
  MemoryNodeOs os;
  os.AddCgroup(kBurstable, CpuLimits{100000, 100000, 50});
  os.AddCgroup(kBurstable + "/c1", CpuLimits{100000, 100000, 50});
  os.AddCgroup(std::string("kubepods/besteffort/pod") + kUid2, CpuLimits{1000, 100000, 1});
  os.AddCgroup("kubepods/burstable/not-a-pod/c", CpuLimits{1000, 100000, 1});
  auto rebuilt = RebuildOriginals(os, CgroupDriver::kCgroupfs, "");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_TRUE(rebuilt->empty());
}

TEST(JournalRebuildTest, SystemdNamesUnderACgroupRootGiveBackTheUid) {
  MemoryNodeOs os;
  std::string id = kUid;
  std::replace(id.begin(), id.end(), '-', '_');
  const std::string pod =
      "root/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + id + ".slice";
  os.AddCgroup(pod, CpuLimits{5000, 100000, 1});
  os.AddCgroup(pod + "/cri-containerd-1.scope", CpuLimits{-1, 100000, 1});
  auto rebuilt = RebuildOriginals(os, CgroupDriver::kSystemd, "root");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  ASSERT_EQ(rebuilt->count(kUid), 1u) << "uid with '-' restored";
  EXPECT_EQ(rebuilt->at(kUid).cpu->cgroup, pod);
  EXPECT_EQ(rebuilt->at(kUid).cpu->limits.quota_us, -1);
}

TEST(JournalRebuildTest, HugeChildQuotasSaturateAndErrorsAreReported) {
  MemoryNodeOs os;
  os.AddCgroup(kBurstable, CpuLimits{30000, 100000, 10});
  os.AddCgroup(kBurstable + "/c1", CpuLimits{int64_t{1} << 62, 1000, 10000});
  os.AddCgroup(kBurstable + "/c2", CpuLimits{int64_t{1} << 62, 1000, 10000});
  auto rebuilt = RebuildOriginals(os, CgroupDriver::kCgroupfs, "");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(rebuilt->at(kUid).cpu->limits, (CpuLimits{kMaxQuotaUs, 100000, 10000}));

  FaultyNodeOs faulty(&os);
  faulty.FailNext(NodeOsMethod::kListCgroups, Status::Internal("EIO"));
  EXPECT_EQ(RebuildOriginals(faulty, CgroupDriver::kCgroupfs, "").status().code(),
            StatusCode::kInternal);
}

// What the agent does with a corrupt journal: the rebuilt originals come back once the
// pod leaves the allocation.
TEST(JournalRebuildTest, RebuiltOriginalsAreRestoredWhenThePodLeaves) {
  MemoryNodeOs os;
  os.AddCgroup(kBurstable, CpuLimits{30000, 100000, 10});
  os.AddCgroup(kBurstable + "/c1", CpuLimits{200000, 100000, 50});
  auto rebuilt = RebuildOriginals(os, CgroupDriver::kCgroupfs, "");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  Journal journal = Journal::InMemory();
  std::map<std::string, std::optional<JournalEntry>> changes(rebuilt->begin(), rebuilt->end());
  ASSERT_TRUE(journal.Commit(changes).ok());
  ReconcilerOptions options;
  options.sleep = [](std::chrono::milliseconds) {};
  Reconciler r(os, journal, options);
  auto released = r.ReleaseAll();
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(*os.ReadCpu(kBurstable), (CpuLimits{200000, 100000, 50}));
  EXPECT_TRUE(journal.entries().empty());
}

}  // namespace
}  // namespace star::agent
