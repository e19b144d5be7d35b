#include "star/agent/host_counters.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "star/test_support/temp_dir.h"

namespace star::agent {
namespace {

namespace fs = std::filesystem;

// A directory laid out like /proc and /sys: two CPUs and the interface eth0.
class FakeHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    paths_.proc = dir_.path() + "/proc";
    paths_.sys = dir_.path() + "/sys";
    Write(paths_.proc + "/stat",
          "cpu  100 5 50 800 20 3 2 10 7 0\n"
          "cpu0 50 2 25 400 10 1 1 5 3 0\n"
          "cpu1 50 3 25 400 10 2 1 5 4 0\n"
          "intr 12345\nctxt 999\n");
    Write(paths_.proc + "/net/route",
          "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
          "eth1\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
          "eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n");
    const std::string net = paths_.sys + "/class/net/eth0";
    Write(net + "/statistics/tx_bytes", "123456789\n");
    Write(net + "/statistics/rx_bytes", "42\n");
    Write(net + "/speed", "10000\n");
    Write(paths_.sys + "/class/net/veth0/speed", "-1\n");
  }

  static void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }

  test_support::TempDir dir_{"host-counters"};
  HostPaths paths_;
};

TEST_F(FakeHostTest, ReadsTheCpuTimeAndTheInterfacesCounters) {
  auto c = ReadHostCounters(paths_, "eth0");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cpus, 2);
  EXPECT_EQ(c->cpu_busy_ticks, 100u + 5 + 50 + 3 + 2 + 10);  // guest (7) is in user already
  EXPECT_EQ(c->cpu_total_ticks, c->cpu_busy_ticks + 800 + 20);
  EXPECT_EQ(c->tx_bytes, 123456789u);
  EXPECT_EQ(c->rx_bytes, 42u);

  auto cpu_only = ReadHostCounters(paths_, "");
  ASSERT_TRUE(cpu_only.ok()) << cpu_only.status();
  EXPECT_EQ(cpu_only->tx_bytes, 0u);
}

TEST_F(FakeHostTest, FindsTheDefaultRouteAndTheLinkSpeed) {
  EXPECT_EQ(DefaultRouteInterface(paths_), "eth0");
  EXPECT_EQ(LinkSpeedBitsPerSecond(paths_, "eth0"), 1e10);
  EXPECT_EQ(LinkSpeedBitsPerSecond(paths_, "veth0"), std::nullopt) << "no speed reported";
  EXPECT_EQ(LinkSpeedBitsPerSecond(paths_, "wlan9"), std::nullopt) << "no such interface";
  Write(paths_.proc + "/net/route", "Iface\tDestination\tGateway\n");
  EXPECT_EQ(DefaultRouteInterface(paths_), std::nullopt);
}

TEST_F(FakeHostTest, AMissingOrBadFileIsAnErrorNamingIt) {
  auto missing = ReadHostCounters(paths_, "eth7");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/class/net/eth7/statistics/tx_bytes"),
            std::string::npos)
      << missing.status();
  auto bad_name = ReadHostCounters(paths_, "../eth0");
  ASSERT_FALSE(bad_name.ok());
  EXPECT_NE(bad_name.status().message().find("interface name"), std::string::npos) << bad_name.status();

  Write(paths_.sys + "/class/net/eth0/statistics/rx_bytes", "lots\n");
  auto garbled = ReadHostCounters(paths_, "eth0");
  ASSERT_FALSE(garbled.ok());
  EXPECT_NE(garbled.status().message().find("rx_bytes: not a counter"), std::string::npos)
      << garbled.status();

  Write(paths_.proc + "/stat", "intr 1\n");
  auto no_cpu = ReadHostCounters(paths_, "");
  ASSERT_FALSE(no_cpu.ok());
  EXPECT_NE(no_cpu.status().message().find("/proc/stat: no cpu lines"), std::string::npos)
      << no_cpu.status();
}

TEST(HostCountersTest, ReadsThisMachine) {
  auto c = ReadHostCounters(HostPaths{}, "lo");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cpus, sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_GT(c->cpu_total_ticks, c->cpu_busy_ticks);
}

}  // namespace
}  // namespace star::agent
