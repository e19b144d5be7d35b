#include "local/inject_spec.h"

#include <gtest/gtest.h>

namespace star::local {
namespace {

TEST(ParseInjection, EveryKindWithItsDefaultsAndTimes) {
  auto cpu = ParseInjection("worker=2,cpu=0.5");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->worker, 2);
  EXPECT_EQ(cpu->kind, InjectionKind::kCpu);
  EXPECT_DOUBLE_EQ(cpu->cpu_fraction, 0.5);
  EXPECT_DOUBLE_EQ(cpu->start_seconds, 0);
  EXPECT_FALSE(cpu->end_seconds.has_value());

  auto n = ParseInjection("start=12s,neighbor=3,worker=0,guarantee=200m,end=2m");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->kind, InjectionKind::kNeighbor);
  EXPECT_EQ(n->neighbor_threads, 3);
  EXPECT_DOUBLE_EQ(n->neighbor_guarantee_cpus, 0.2);
  EXPECT_DOUBLE_EQ(n->start_seconds, 12);
  EXPECT_DOUBLE_EQ(*n->end_seconds, 120);
  EXPECT_EQ(n->text, "start=12s,neighbor=3,worker=0,guarantee=200m,end=2m");

  auto bw = ParseInjection("worker=1,bandwidth=20mbit,start=500ms");
  ASSERT_TRUE(bw.ok()) << bw.status();
  EXPECT_EQ(bw->bandwidth_bps, 20'000'000);
  EXPECT_DOUBLE_EQ(bw->start_seconds, 0.5);

  auto d = ParseInjection("worker=1,delay=50ms");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_DOUBLE_EQ(d->delay_seconds, 0.05);
}

TEST(ParseUnits, DurationsRatesAndCpuQuantities) {
  EXPECT_DOUBLE_EQ(*ParseDuration("1.5s"), 1.5);
  EXPECT_DOUBLE_EQ(*ParseDuration("0s"), 0);
  EXPECT_DOUBLE_EQ(*ParseDuration("1h"), 3600);
  EXPECT_EQ(*ParseRate("500kbit"), 500'000);
  EXPECT_EQ(*ParseRate("1gbit"), 1'000'000'000);
  EXPECT_EQ(*ParseRate("100bps"), 800);
  EXPECT_EQ(*ParseRate("2mbps"), 16'000'000);
  EXPECT_EQ(*ParseRate("1.5mbit"), 1'500'000);
  EXPECT_EQ(*ParseCpuQuantity("500m"), 500);
  EXPECT_EQ(*ParseCpuQuantity("1.5"), 1500);
  EXPECT_EQ(*ParseCpuQuantity("2"), 2000);
  for (const char* bad : {"12", "s", "12x", "-1s", "1.2.3s", ""}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
  for (const char* bad : {"20", "20mb", "mbit", "-5mbit"}) EXPECT_FALSE(ParseRate(bad).ok()) << bad;
  for (const char* bad : {"0", "0m", "abc", "-1", "1.5x"}) EXPECT_FALSE(ParseCpuQuantity(bad).ok()) << bad;
  EXPECT_NE(ParseDuration("12").status().message().find("needs a unit"), std::string::npos);
}

struct Bad {
  const char* spec;
  const char* message;  // expected in the error
};

class ParseInjectionRejects : public ::testing::TestWithParam<Bad> {};

TEST_P(ParseInjectionRejects, NamingTheSpecTheKeyAndTheReason) {
  auto r = ParseInjection(GetParam().spec);
  ASSERT_FALSE(r.ok()) << GetParam().spec;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  const std::string m = r.status().message();
  EXPECT_EQ(m.rfind(std::string("--inject \"") + GetParam().spec + "\": ", 0), 0u) << m;
  EXPECT_NE(m.find(GetParam().message), std::string::npos) << m;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ParseInjectionRejects,
    ::testing::Values(Bad{"worker=1,cpu=2", "cpu: must be in (0, 1], got 2"},
                      Bad{"worker=1,cpu=0", "cpu: must be in (0, 1]"},
                      Bad{"worker=1,cpu=0.5x", "cpu: must be in (0, 1], got 0.5x"},
                      Bad{"worker=1", "needs one of cpu, neighbor, bandwidth, delay"},
                      Bad{"cpu=0.5", "worker: required"},
                      Bad{"worker=-1,cpu=0.5", "worker: must be an integer >= 0"},
                      Bad{"worker=a,cpu=0.5", "worker: must be an integer >= 0"},
                      Bad{"worker=1,cpu=0.5,neighbor=2", "cpu and neighbor are exclusive"},
                      Bad{"worker=1,cpu=0.5,cpu=0.2", "cpu: given twice"},
                      Bad{"worker=1,cpu=0.5,speed=3", "unknown key \"speed\""},
                      Bad{"worker=1,,cpu=0.5", "empty key=value pair"},
                      Bad{"worker=1,cpu", "\"cpu\": expected key=value"},
                      Bad{"worker=1,cpu=", "cpu: empty value"},
                      Bad{"worker=1,neighbor=0", "neighbor: must be an integer in [1, 64]"},
                      Bad{"worker=1,neighbor=65", "neighbor: must be an integer in [1, 64]"},
                      Bad{"worker=1,cpu=0.5,guarantee=1", "guarantee: only with neighbor"},
                      Bad{"worker=1,neighbor=2,guarantee=x", "guarantee: invalid CPU quantity"},
                      Bad{"worker=1,bandwidth=20", "bandwidth: \"20\" needs a unit"},
                      Bad{"worker=1,bandwidth=1kbit", "bandwidth: must be >= 8kbit"},
                      Bad{"worker=1,delay=0s", "delay: must be in (0s, 10s]"},
                      Bad{"worker=1,delay=11s", "delay: must be in (0s, 10s]"},
                      Bad{"worker=1,cpu=0.5,start=10", "start: \"10\" needs a unit"},
                      Bad{"worker=1,cpu=0.5,start=10s,end=5s", "end: must be after start"},
                      Bad{"worker=1,cpu=0.5,end=0s", "end: must be after start"}));

TEST(ValidateInjections, WorkerRangeAndOverlapsOfTheSameKind) {
  auto parse = [](const char* s) { return *ParseInjection(s); };
  EXPECT_TRUE(ValidateInjections({parse("worker=0,cpu=0.5"), parse("worker=3,neighbor=2")}, 4).ok());
  Status s = ValidateInjections({parse("worker=4,cpu=0.5")}, 4);
  EXPECT_NE(s.message().find("worker: must be < 4 (the job's workers), got 4"), std::string::npos)
      << s;
  // Same kind, same worker: only disjoint windows.
  EXPECT_TRUE(ValidateInjections({parse("worker=1,cpu=0.5,end=10s"),
                                  parse("worker=1,cpu=0.2,start=10s")}, 2).ok());
  s = ValidateInjections({parse("worker=1,cpu=0.5"), parse("worker=1,cpu=0.2,start=5s")}, 2);
  EXPECT_NE(s.message().find("overlap"), std::string::npos) << s;
  EXPECT_NE(s.message().find("worker=1,cpu=0.2,start=5s"), std::string::npos) << s;
  // Different kinds on one worker may overlap.
  EXPECT_TRUE(ValidateInjections({parse("worker=1,cpu=0.5"), parse("worker=1,bandwidth=10mbit")}, 2).ok());
  EXPECT_FALSE(ValidateInjections({}, 0).ok());
}

}  // namespace
}  // namespace star::local
