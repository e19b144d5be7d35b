// The CPU and bandwidth scenarios of real_node_os_test.cc, on MemoryNodeOs and on
// FaultyNodeOs wrapping it: write / read back / release, argument checks, error
// propagation, and that an injected failure leaves nothing half-applied.
#include <gtest/gtest.h>

#include "star/agent/faulty_node_os.h"
#include "star/agent/memory_node_os.h"

namespace star::agent {
namespace {

constexpr char kCg[] = "kubepods/pod1";
constexpr char kIf[] = "veth1";

TEST(MemoryNodeOs, CpuQuotaIsWrittenReadBackAndReleased) {
  MemoryNodeOs os;
  os.AddCgroup(kCg);
  EXPECT_TRUE(*os.CgroupExists(kCg));
  EXPECT_FALSE(*os.CgroupExists("kubepods/other"));
  CpuLimits l{20000, 100000, 50};
  ASSERT_TRUE(os.WriteCpu(kCg, l).ok());
  EXPECT_EQ(*os.ReadCpu(kCg), l);
  ASSERT_TRUE(os.WriteCpu(kCg, CpuLimits{}).ok());
  EXPECT_EQ(os.ReadCpu(kCg)->quota_us, -1);
  EXPECT_EQ(os.cpu_writes(), 2);
  EXPECT_EQ(os.cpu_writes(kCg), 2);
}

TEST(MemoryNodeOs, ListsChildCgroupsIncludingImplicitParents) {
  MemoryNodeOs os;
  os.AddCgroup("kubepods/burstable/pod1/c1");
  os.AddCgroup("kubepods/burstable/pod1/c2");
  os.AddCgroup("kubepods/pod2");
  EXPECT_EQ(*os.ListCgroups("kubepods"), (std::vector<std::string>{"burstable", "pod2"}));
  EXPECT_EQ(*os.ListCgroups("kubepods/burstable/pod1"), (std::vector<std::string>{"c1", "c2"}));
  EXPECT_TRUE(os.ListCgroups("kubepods/pod2")->empty());
  EXPECT_EQ(os.ListCgroups("kubepods/besteffort").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(os.ListCgroups("../etc").status().code(), StatusCode::kInvalidArgument);
}

TEST(MemoryNodeOs, CpuStatsComeFromTheTestHook) {
  MemoryNodeOs os;
  os.SetCpuStats(kCg, CpuStats{1000, 10, 3, 500});
  auto s = os.ReadCpuStats(kCg);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->nr_throttled, 3);
  EXPECT_EQ(s->usage_usec, 1000);
}

TEST(MemoryNodeOs, RejectsBadPathsAndLimitsWithoutWriting) {
  MemoryNodeOs os;
  os.AddCgroup(kCg);
  EXPECT_EQ(os.WriteCpu("/abs", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(os.WriteCpu("kubepods/../x", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(os.WriteCpu("", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(os.WriteCpu(kCg, CpuLimits{500, 100000, 100}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(os.WriteCpu(kCg, CpuLimits{-1, 100, 100}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(os.WriteCpu(kCg, CpuLimits{-1, 100000, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(os.WriteCpu("kubepods/missing", {}).code(), StatusCode::kNotFound);
  EXPECT_EQ(os.ReadCpu("kubepods/missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(os.cpu_writes(), 0);
  EXPECT_EQ(*os.ReadCpu(kCg), CpuLimits{});
}

TEST(MemoryNodeOs, BandwidthIsWrittenReadBackAndReleased) {
  MemoryNodeOs os;
  os.AddInterface(kIf);
  EXPECT_TRUE(*os.InterfaceExists(kIf));
  EXPECT_FALSE(*os.InterfaceExists("veth2"));
  NetLimits l{20'000'000, 0, 3};
  ASSERT_TRUE(os.WriteNet(kIf, l).ok());
  EXPECT_EQ(*os.ReadNet(kIf), l);
  ASSERT_TRUE(os.WriteNet(kIf, NetLimits{}).ok());
  EXPECT_EQ(*os.ReadNet(kIf), NetLimits{});
  EXPECT_EQ(os.WriteNet(kIf, NetLimits{-1, 0, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(os.WriteNet(kIf, NetLimits{1, 0, 8}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(os.WriteNet("veth2", l).code(), StatusCode::kNotFound);
  EXPECT_EQ(os.net_writes(), 2);
  os.SetNetStats(kIf, NetStats{7, 9});
  EXPECT_EQ(os.ReadNetStats(kIf)->rx_bytes, 9);
}

TEST(MemoryNodeOs, RatesAreKeptInWholeBytesPerSecondLikeTheRealOne) {
  MemoryNodeOs os;
  os.AddInterface(kIf);
  ASSERT_TRUE(os.WriteNet(kIf, NetLimits{1003, 0, 0}).ok());
  EXPECT_EQ(os.ReadNet(kIf)->egress_bits_per_second, 1000);
}

class FaultyNodeOsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mem_.AddCgroup(kCg);
    mem_.AddInterface(kIf);
  }
  MemoryNodeOs mem_;
  FaultyNodeOs os_{&mem_};
};

TEST_F(FaultyNodeOsTest, PassesThroughWhenNoFaultIsInjected) {
  ASSERT_TRUE(os_.WriteCpu(kCg, CpuLimits{20000, 100000, 100}).ok());
  EXPECT_EQ(os_.ReadCpu(kCg)->quota_us, 20000);
  ASSERT_TRUE(os_.WriteNet(kIf, NetLimits{8000, 0, 1}).ok());
  EXPECT_EQ(*os_.ReadNet(kIf), (NetLimits{8000, 0, 1}));
  EXPECT_EQ(os_.writes_passed(), 2);
  EXPECT_EQ(os_.cgroup_version(), CgroupVersion::kV1);
}

TEST_F(FaultyNodeOsTest, InjectedWriteFailureIsReturnedAndNothingIsApplied) {
  os_.FailNext(NodeOsMethod::kWriteCpu, Status::Unavailable("injected"), 2, 1);
  ASSERT_TRUE(os_.WriteCpu(kCg, CpuLimits{20000, 100000, 100}).ok());  // skipped one
  EXPECT_EQ(os_.WriteCpu(kCg, CpuLimits{30000, 100000, 100}).code(), StatusCode::kUnavailable);
  EXPECT_EQ(os_.WriteCpu(kCg, CpuLimits{30000, 100000, 100}).code(), StatusCode::kUnavailable);
  EXPECT_EQ(mem_.ReadCpu(kCg)->quota_us, 20000);
  EXPECT_EQ(mem_.cpu_writes(), 1);
  ASSERT_TRUE(os_.WriteCpu(kCg, CpuLimits{30000, 100000, 100}).ok());
  EXPECT_EQ(mem_.ReadCpu(kCg)->quota_us, 30000);
  EXPECT_EQ(os_.injected_failures(), 2);
  EXPECT_EQ(os_.calls(NodeOsMethod::kWriteCpu), 4);
}

TEST_F(FaultyNodeOsTest, ReadFailuresPropagate) {
  os_.FailNext(NodeOsMethod::kReadNet, Status::Internal("netlink down"));
  os_.FailNext(NodeOsMethod::kReadCpuStats, Status::NotFound("gone"));
  EXPECT_EQ(os_.ReadNet(kIf).status().code(), StatusCode::kInternal);
  EXPECT_EQ(os_.ReadCpuStats(kCg).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(os_.ReadNet(kIf).ok());
  EXPECT_TRUE(os_.ReadCpuStats(kCg).ok());
}

TEST_F(FaultyNodeOsTest, FailAfterApplyAppliesButReportsTheError) {
  os_.FailNextAfterApply(NodeOsMethod::kWriteNet, Status::DeadlineExceeded("lost reply"));
  EXPECT_EQ(os_.WriteNet(kIf, NetLimits{8000, 0, 0}).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(mem_.ReadNet(kIf)->egress_bits_per_second, 8000);
}

TEST_F(FaultyNodeOsTest, CrashAfterWritesAbortsEveryLaterCallUntilHealed) {
  os_.CrashAfterWrites(2);
  ASSERT_TRUE(os_.WriteCpu(kCg, CpuLimits{20000, 100000, 100}).ok());
  ASSERT_TRUE(os_.ReadCpu(kCg).ok());
  ASSERT_TRUE(os_.WriteNet(kIf, NetLimits{8000, 0, 0}).ok());
  EXPECT_TRUE(os_.crashed());
  EXPECT_EQ(os_.WriteCpu(kCg, CpuLimits{}).code(), StatusCode::kAborted);
  EXPECT_EQ(os_.ReadCpu(kCg).status().code(), StatusCode::kAborted);
  EXPECT_EQ(os_.InterfaceExists(kIf).status().code(), StatusCode::kAborted);
  EXPECT_EQ(mem_.cpu_writes(), 1);
  EXPECT_EQ(mem_.ReadCpu(kCg)->quota_us, 20000);
  os_.Heal();
  EXPECT_TRUE(os_.WriteCpu(kCg, CpuLimits{}).ok());
}

TEST_F(FaultyNodeOsTest, ProbabilisticFailuresAreDeterministicForASeed) {
  auto pattern = [this](uint64_t seed) {
    os_.Heal();
    os_.FailWithProbability(NodeOsMethod::kReadCpu, 0.5, Status::Unavailable("flaky"), seed);
    std::string out;
    for (int i = 0; i < 64; ++i) out += os_.ReadCpu(kCg).ok() ? '.' : 'x';
    return out;
  };
  const std::string a = pattern(42);
  EXPECT_EQ(a, pattern(42));
  EXPECT_NE(a.find('x'), std::string::npos);
  EXPECT_NE(a.find('.'), std::string::npos);
}

}  // namespace
}  // namespace star::agent
