#include "star/agent/headroom.h"

#include <gtest/gtest.h>

namespace star::agent {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

HostCounters At(Clock::time_point t, uint64_t busy, uint64_t total, uint64_t tx, uint64_t rx) {
  HostCounters c;
  c.cpus = 4;
  c.cpu_busy_ticks = busy;
  c.cpu_total_ticks = total;
  c.tx_bytes = tx;
  c.rx_bytes = rx;
  c.at = t;
  return c;
}

TEST(HeadroomBetweenTest, UsedIsTheBusyShareOfTheCpusAndTheBytesPerSecond) {
  const Clock::time_point t0{};
  // 2 s: 300 of 1000 ticks busy; 250 MB out and 25 MB in.
  const auto h = HeadroomBetween(At(t0, 1000, 5000, 0, 0),
                                 At(t0 + 2s, 1300, 6000, 250'000'000, 25'000'000), "eth0", 1e10,
                                 "2026-01-01T00:00:02Z");
  EXPECT_EQ(h.sampled_at, "2026-01-01T00:00:02Z");
  EXPECT_DOUBLE_EQ(h.interval_seconds, 2);
  EXPECT_DOUBLE_EQ(h.cpu_capacity_millicores, 4000);
  EXPECT_DOUBLE_EQ(h.cpu_used_millicores, 1200);
  EXPECT_EQ(h.interface, "eth0");
  EXPECT_DOUBLE_EQ(h.egress_bits_per_second, 1e9);
  EXPECT_DOUBLE_EQ(h.ingress_bits_per_second, 1e8);
  EXPECT_DOUBLE_EQ(*api::NicHeadroomBitsPerSecond(h), 9e9);
  EXPECT_DOUBLE_EQ(api::CpuHeadroomMillicores(h), 2800);
}

TEST(HeadroomBetweenTest, ResetCountersCountAsNothingAndNoInterfaceMeansCpuOnly) {
  const Clock::time_point t0{};
  const auto reset = HeadroomBetween(At(t0, 900, 5000, 500, 500), At(t0 + 1s, 100, 4000, 10, 10),
                                     "eth0", 0, "2026-01-01T00:00:01Z");
  EXPECT_DOUBLE_EQ(reset.cpu_used_millicores, 0);
  EXPECT_DOUBLE_EQ(reset.egress_bits_per_second, 0);
  EXPECT_FALSE(api::NicHeadroomBitsPerSecond(reset).has_value()) << "capacity unknown";

  const auto cpu_only = HeadroomBetween(At(t0, 0, 0, 0, 0), At(t0 + 1s, 100, 100, 9, 9), "", 1e9,
                                        "2026-01-01T00:00:01Z");
  EXPECT_DOUBLE_EQ(cpu_only.cpu_used_millicores, 4000);
  EXPECT_EQ(cpu_only.interface, "");
  EXPECT_DOUBLE_EQ(cpu_only.nic_capacity_bits_per_second, 0);
}

api::NodeHeadroom Sample(double cpu_used, double egress) {
  return api::NodeHeadroom{"2026-01-01T00:00:00Z", 5, 4000, cpu_used, "eth0", 1e9, egress, 0};
}

TEST(ShouldWriteHeadroomTest, FirstAlwaysThenOnlyBigMovesAndNeverFasterThanTheInterval) {
  const HeadroomOptions o;  // 5 s, 30 s, 5%
  const Clock::time_point t0{};
  const auto written = Sample(1000, 1e8);
  EXPECT_TRUE(ShouldWriteHeadroom(std::nullopt, t0, written, t0, o));
  // A big move, but too soon.
  EXPECT_FALSE(ShouldWriteHeadroom(written, t0, Sample(3000, 1e8), t0 + 4s, o));
  // Past the interval: small moves wait, a move of 5% of a capacity goes.
  EXPECT_FALSE(ShouldWriteHeadroom(written, t0, Sample(1100, 1.2e8), t0 + 6s, o));
  EXPECT_TRUE(ShouldWriteHeadroom(written, t0, Sample(1250, 1e8), t0 + 6s, o));
  EXPECT_TRUE(ShouldWriteHeadroom(written, t0, Sample(1000, 1.6e8), t0 + 6s, o));
  // Unchanged, but old: refreshed.
  EXPECT_FALSE(ShouldWriteHeadroom(written, t0, written, t0 + 29s, o));
  EXPECT_TRUE(ShouldWriteHeadroom(written, t0, written, t0 + 30s, o));
  // Another interface or capacity is written at the next interval.
  auto other = written;
  other.nic_capacity_bits_per_second = 1e10;
  EXPECT_TRUE(ShouldWriteHeadroom(written, t0, other, t0 + 5s, o));
}

}  // namespace
}  // namespace star::agent
