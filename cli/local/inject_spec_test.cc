#include "local/inject_spec.h"

#include <string>
#include <vector>

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
  EXPECT_DOUBLE_EQ(cpu->neighbor_guarantee_cpus, 0);

  auto n = ParseInjection("start=12s,neighbor=3,worker=0,guarantee=200m,end=2m");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->kind, InjectionKind::kNeighbor);
  EXPECT_EQ(n->neighbor_threads, 3);
  EXPECT_DOUBLE_EQ(n->neighbor_guarantee_cpus, 0.2);
  EXPECT_DOUBLE_EQ(n->start_seconds, 12);
  ASSERT_TRUE(n->end_seconds.has_value());
  EXPECT_DOUBLE_EQ(*n->end_seconds, 120);
  EXPECT_EQ(n->text, "start=12s,neighbor=3,worker=0,guarantee=200m,end=2m");

  auto g = ParseInjection("worker=0,neighbor=64,guarantee=1.5");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->neighbor_threads, 64);
  EXPECT_DOUBLE_EQ(g->neighbor_guarantee_cpus, 1.5);

  auto bw = ParseInjection("worker=1,bandwidth=20mbit,start=500ms");
  ASSERT_TRUE(bw.ok()) << bw.status();
  EXPECT_EQ(bw->kind, InjectionKind::kBandwidth);
  EXPECT_EQ(bw->bandwidth_bps, 20'000'000);
  EXPECT_DOUBLE_EQ(bw->start_seconds, 0.5);

  auto d = ParseInjection("worker=1,delay=50ms,end=1h");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind, InjectionKind::kDelay);
  EXPECT_DOUBLE_EQ(d->delay_seconds, 0.05);
  EXPECT_DOUBLE_EQ(*d->end_seconds, 3600);

  auto full = ParseInjection("worker=0,cpu=1");
  ASSERT_TRUE(full.ok()) << full.status();  // 1 is inside (0, 1]
  auto delay10 = ParseInjection("worker=0,delay=10s");
  ASSERT_TRUE(delay10.ok()) << delay10.status();  // 10 s is inside (0, 10]
}

TEST(ParseInjection, SpacesAroundKeysAndValuesAreIgnored) {
  auto in = ParseInjection("worker = 1, cpu = 0.25 ,start=1s");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->worker, 1);
  EXPECT_DOUBLE_EQ(in->cpu_fraction, 0.25);
  EXPECT_EQ(in->text, "worker = 1, cpu = 0.25 ,start=1s");  // kept as given
}

TEST(InjectionKind, WireNames) {
  EXPECT_EQ(ToString(InjectionKind::kCpu), "cpu");
  EXPECT_EQ(ToString(InjectionKind::kNeighbor), "neighbor");
  EXPECT_EQ(ToString(InjectionKind::kBandwidth), "bandwidth");
  EXPECT_EQ(ToString(InjectionKind::kDelay), "delay");
}

TEST(ParseDuration, Units) {
  EXPECT_DOUBLE_EQ(*ParseDuration("12s"), 12);
  EXPECT_DOUBLE_EQ(*ParseDuration("500ms"), 0.5);
  EXPECT_DOUBLE_EQ(*ParseDuration("2m"), 120);
  EXPECT_DOUBLE_EQ(*ParseDuration("1h"), 3600);
  EXPECT_DOUBLE_EQ(*ParseDuration("1.5s"), 1.5);
  EXPECT_DOUBLE_EQ(*ParseDuration("0s"), 0);
  EXPECT_DOUBLE_EQ(*ParseDuration("1e3ms"), 1);
}

TEST(ParseDuration, RejectsWithTheReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"12", "needs a unit: s, ms, m or h; got \"12\""},
      {"", "must be a duration like 12s, 500ms or 2m, got \"\""},
      {"s", "must be a duration like 12s, 500ms or 2m, got \"s\""},
      {"1.2.3s", "must be a duration like 12s, 500ms or 2m, got \"1.2.3s\""},
      {"+1s", "must be a duration like 12s, 500ms or 2m, got \"+1s\""},
      {"12x", "unknown unit \"x\" in \"12x\" (use s, ms, m or h)"},
      {"3d", "unknown unit \"d\" in \"3d\" (use s, ms, m or h)"},
      {"12 s", "unknown unit \" s\" in \"12 s\" (use s, ms, m or h)"},
      {"-1s", "must be >= 0, got \"-1s\""},
      {"1e308h", "out of range: \"1e308h\""},
      {"infs", "must be a duration like 12s, 500ms or 2m, got \"infs\""},
  };
  for (const auto& [text, want] : cases) {
    auto d = ParseDuration(text);
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(d.status().message(), want) << text;
  }
}

TEST(ParseRate, TcUnitsAreThousandBased) {
  EXPECT_EQ(*ParseRate("20mbit"), 20'000'000);
  EXPECT_EQ(*ParseRate("500kbit"), 500'000);
  EXPECT_EQ(*ParseRate("1gbit"), 1'000'000'000);
  EXPECT_EQ(*ParseRate("8000bit"), 8000);
  EXPECT_EQ(*ParseRate("100bps"), 800);        // bytes per second
  EXPECT_EQ(*ParseRate("2mbps"), 16'000'000);  // megabytes per second
  EXPECT_EQ(*ParseRate("1.5mbit"), 1'500'000);
  EXPECT_EQ(*ParseRate("20Mbit"), 20'000'000);  // any case, like tc
  EXPECT_EQ(*ParseRate("1tbit"), 1'000'000'000'000);
  EXPECT_EQ(*ParseRate("0bit"), 0);
}

TEST(ParseRate, RejectsWithTheReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"20", "needs a unit: bit, kbit, mbit, gbit, bps, kbps, mbps or gbps; got \"20\""},
      {"mbit", "must be a rate like 20mbit or 500kbit, got \"mbit\""},
      {"20mb", "unknown unit \"mb\" in \"20mb\" (use bit, kbit, mbit, gbit, bps, kbps, mbps or gbps)"},
      {"20kibit", "unknown unit \"kibit\" in \"20kibit\" (use bit, kbit, mbit, gbit, bps, kbps, mbps or gbps)"},
      {"-5mbit", "must be >= 0, got \"-5mbit\""},
      {"2000tbit", "must be at most 1000tbit, got \"2000tbit\""},
  };
  for (const auto& [text, want] : cases) {
    auto r = ParseRate(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().message(), want) << text;
  }
}

TEST(ParseCpuQuantity, KubernetesQuantitiesRoundedToTheNearestMillicore) {
  EXPECT_EQ(*ParseCpuQuantity("500m"), 500);
  EXPECT_EQ(*ParseCpuQuantity("1"), 1000);
  EXPECT_EQ(*ParseCpuQuantity("1.5"), 1500);
  EXPECT_EQ(*ParseCpuQuantity("0.25"), 250);
  EXPECT_EQ(*ParseCpuQuantity("0.0016"), 2);   // 1.6m -> 2m
  EXPECT_EQ(*ParseCpuQuantity("1.4m"), 1);
}

TEST(ParseCpuQuantity, RejectsWithTheReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0", "must be > 0 (at least 1m), got \"0\""},
      {"0m", "must be > 0 (at least 1m), got \"0m\""},
      {"0.0004", "must be > 0 (at least 1m), got \"0.0004\""},
      {"-1", "must be > 0 (at least 1m), got \"-1\""},
      {"abc", "must be a CPU quantity like 500m, 0.5 or 2, got \"abc\""},
      {"1.5x", "must be a CPU quantity like 500m, 0.5 or 2, got \"1.5x\""},
      {"m", "must be a CPU quantity like 500m, 0.5 or 2, got \"m\""},
      {"", "must be a CPU quantity like 500m, 0.5 or 2, got \"\""},
      {"1e20", "out of range: \"1e20\""},
  };
  for (const auto& [text, want] : cases) {
    auto c = ParseCpuQuantity(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().message(), want) << text;
  }
}

struct Bad {
  std::string spec;
  std::string want;  // the exact message after `--inject "SPEC": `
};

class ParseInjectionRejects : public testing::TestWithParam<Bad> {};

TEST_P(ParseInjectionRejects, NamingTheSpecTheKeyAndTheReason) {
  auto r = ParseInjection(GetParam().spec);
  ASSERT_FALSE(r.ok()) << "accepted: " << GetParam().spec;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "--inject \"" + GetParam().spec + "\": " + GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParseInjectionRejects,
    testing::Values(
        // structure
        Bad{"", "is empty; expected worker=W and one of cpu=F, neighbor=N, bandwidth=RATE, delay=D, "
                "bwneighbor=RATE"},
        Bad{"worker=1,,cpu=0.5", "empty key=value pair (a stray ',')"},
        Bad{"worker=1,cpu=0.5,", "empty key=value pair (a stray ',')"},
        Bad{"worker=1,cpu", "cpu: missing '=' (expected key=value)"},
        Bad{"worker=1,=0.5", "\"=0.5\": missing key (expected key=value)"},
        Bad{"worker=1,cpu=", "cpu: missing value"},
        Bad{"worker=1,cpu=0.5,speed=3",
            "speed: unknown key (known: worker, cpu, neighbor, bandwidth, delay, bwneighbor, "
            "start, end, guarantee, link, peer)"},
        Bad{"worker=1,CPU=0.5",
            "CPU: unknown key (known: worker, cpu, neighbor, bandwidth, delay, bwneighbor, "
            "start, end, guarantee, link, peer)"},
        Bad{"worker=1,cpu=0.5,cpu=0.2", "cpu: given twice"},
        Bad{"worker=1,worker=2,cpu=0.2", "worker: given twice"},
        // worker
        Bad{"cpu=0.5", "worker: required (workers are numbered from 0)"},
        Bad{"worker=-1,cpu=0.5", "worker: must be >= 0, got -1"},
        Bad{"worker=a,cpu=0.5", "worker: must be an integer >= 0, got a"},
        Bad{"worker=1.5,cpu=0.5", "worker: must be an integer >= 0, got 1.5"},
        Bad{"worker=99999999999,cpu=0.5", "worker: out of range, got 99999999999"},
        // kinds
        Bad{"worker=1", "needs one of cpu, neighbor, bandwidth, delay, bwneighbor"},
        Bad{"worker=1,start=1s", "needs one of cpu, neighbor, bandwidth, delay, bwneighbor"},
        Bad{"worker=1,cpu=0.5,neighbor=2", "cpu and neighbor are exclusive"},
        Bad{"worker=1,delay=1s,bandwidth=1mbit", "delay and bandwidth are exclusive"},
        // cpu
        Bad{"worker=1,cpu=2", "cpu: must be in (0, 1], got 2"},
        Bad{"worker=1,cpu=0", "cpu: must be in (0, 1], got 0"},
        Bad{"worker=1,cpu=-0.5", "cpu: must be in (0, 1], got -0.5"},
        Bad{"worker=1,cpu=0.5x", "cpu: must be in (0, 1], got 0.5x"},
        Bad{"worker=1,cpu=nan", "cpu: must be in (0, 1], got nan"},
        // neighbor and guarantee
        Bad{"worker=1,neighbor=0", "neighbor: must be an integer in [1, 64], got 0"},
        Bad{"worker=1,neighbor=65", "neighbor: must be an integer in [1, 64], got 65"},
        Bad{"worker=1,neighbor=2.5", "neighbor: must be an integer in [1, 64], got 2.5"},
        Bad{"worker=1,cpu=0.5,guarantee=1", "guarantee: only allowed with neighbor or bwneighbor"},
        Bad{"worker=1,neighbor=2,guarantee=x",
            "guarantee: must be a CPU quantity like 500m, 0.5 or 2, got \"x\""},
        Bad{"worker=1,neighbor=2,guarantee=0", "guarantee: must be > 0 (at least 1m), got \"0\""},
        // bandwidth and delay
        Bad{"worker=1,bandwidth=20",
            "bandwidth: needs a unit: bit, kbit, mbit, gbit, bps, kbps, mbps or gbps; got \"20\""},
        Bad{"worker=1,bandwidth=1kbit", "bandwidth: must be >= 8000bit (8kbit), got 1kbit"},
        Bad{"worker=1,bandwidth=-1mbit", "bandwidth: must be >= 0, got \"-1mbit\""},
        Bad{"worker=1,delay=0s", "delay: must be in (0, 10] seconds, got 0s"},
        Bad{"worker=1,delay=11s", "delay: must be in (0, 10] seconds, got 11s"},
        Bad{"worker=1,delay=5", "delay: needs a unit: s, ms, m or h; got \"5\""},
        // bwneighbor, its guarantee and link
        Bad{"worker=1,bwneighbor=2gbit",
            "bwneighbor: must be below the link's rate (1gbit, the default; link=RATE sets it), "
            "got 2gbit"},
        Bad{"worker=1,bwneighbor=100mbit,link=100mbit",
            "bwneighbor: must be below the link's rate (100mbit), got 100mbit"},
        Bad{"worker=1,bwneighbor=500mbit,guarantee=600mbit",
            "guarantee: must be at most the bwneighbor rate (500mbit), got 600mbit"},
        Bad{"worker=1,bwneighbor=500mbit,guarantee=0.5",
            "guarantee: needs a unit: bit, kbit, mbit, gbit, bps, kbps, mbps or gbps; got \"0.5\""},
        Bad{"worker=1,bwneighbor=1kbit", "bwneighbor: must be >= 8000bit (8kbit), got 1kbit"},
        Bad{"worker=1,cpu=0.5,link=1gbit", "link: only allowed with bwneighbor"},
        Bad{"worker=1,bwneighbor=1mbit,link=8kbit", "link: must be >= 16000bit (16kbit), got 8kbit"},
        Bad{"worker=1,bwneighbor=1mbit,delay=1ms", "bwneighbor and delay are exclusive"},
        // peer
        Bad{"worker=1,cpu=0.5,peer=2", "peer: only with bandwidth or delay"},
        Bad{"worker=1,bwneighbor=1mbit,peer=2", "peer: only with bandwidth or delay"},
        Bad{"worker=1,delay=50ms,peer=2,start=10s",
            "start: a delay with peer lasts the whole run (the stages take it at launch)"},
        Bad{"worker=1,delay=50ms,peer=2,end=10s",
            "end: a delay with peer lasts the whole run (the stages take it at launch)"},
        Bad{"worker=1,bandwidth=1mbit,peer=1", "peer: must be another worker than 1, got 1"},
        Bad{"worker=1,bandwidth=1mbit,peer=-1", "peer: must be >= 0, got -1"},
        Bad{"worker=1,bandwidth=1mbit,peer=x", "peer: must be an integer >= 0, got x"},
        Bad{"worker=1,bandwidth=1mbit,peer=0.5", "peer: must be an integer >= 0, got 0.5"},
        Bad{"worker=1,bandwidth=1mbit,peer=99999999999", "peer: out of range, got 99999999999"},
        Bad{"worker=1,bandwidth=1gbit,peer=2",
            "bandwidth: must be below the workers' uplink rate (1gbit) with peer, got 1gbit"},
        // start and end
        Bad{"worker=1,cpu=0.5,start=10", "start: needs a unit: s, ms, m or h; got \"10\""},
        Bad{"worker=1,cpu=0.5,start=-1s", "start: must be >= 0, got \"-1s\""},
        Bad{"worker=1,cpu=0.5,start=10s,end=5s", "end: must be > start (10s), got 5s"},
        Bad{"worker=1,cpu=0.5,start=10s,end=10s", "end: must be > start (10s), got 10s"},
        Bad{"worker=1,cpu=0.5,end=0s", "end: must be > start (0s), got 0s"}));

std::vector<Injection> Parse(const std::vector<std::string>& specs) {
  std::vector<Injection> out;
  for (const auto& s : specs) {
    auto in = ParseInjection(s);
    EXPECT_TRUE(in.ok()) << in.status();
    if (in.ok()) out.push_back(*in);
  }
  return out;
}

TEST(ValidateInjections, AcceptsWorkersInRangeAndDisjointWindows) {
  EXPECT_TRUE(ValidateInjections(Parse({"worker=0,cpu=0.5", "worker=3,neighbor=2"}), 4).ok());
  // Same kind and worker: windows touching at 10 s do not overlap ([start, end)).
  EXPECT_TRUE(ValidateInjections(Parse({"worker=1,cpu=0.5,end=10s",
                                        "worker=1,cpu=0.2,start=10s"}), 2).ok());
  // Different kinds on one worker, or one kind on different workers, may overlap.
  EXPECT_TRUE(ValidateInjections(Parse({"worker=1,cpu=0.5", "worker=1,bandwidth=10mbit",
                                        "worker=1,neighbor=2", "worker=1,delay=5ms",
                                        "worker=0,cpu=0.5"}), 2).ok());
  EXPECT_TRUE(ValidateInjections({}, 1).ok());
}

TEST(ValidateInjections, RejectsAWorkerBeyondTheJob) {
  Status s = ValidateInjections(Parse({"worker=0,cpu=0.5", "worker=9,cpu=0.5"}), 4);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--inject \"worker=9,cpu=0.5\": worker: must be < 4 (the job's workers), got 9");
  s = ValidateInjections(Parse({"worker=4,delay=1ms"}), 4);
  EXPECT_EQ(s.message(), "--inject \"worker=4,delay=1ms\": worker: must be < 4 (the job's workers), got 4");
}

TEST(ValidateInjections, RejectsOverlapsOfOneKindOnOneWorkerNamingBoth) {
  Status s = ValidateInjections(Parse({"worker=1,cpu=0.5", "worker=1,cpu=0.2,start=5s"}), 2);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--inject \"worker=1,cpu=0.5\" and --inject \"worker=1,cpu=0.2,start=5s\" overlap: both "
            "inject cpu on worker 1 from 5s to the job's end (one injection of a kind per worker "
            "at a time)");
  s = ValidateInjections(Parse({"worker=0,neighbor=2,start=10s,end=30s",
                                "worker=0,neighbor=4,start=20s,end=1m"}), 1);
  EXPECT_EQ(s.message(),
            "--inject \"worker=0,neighbor=2,start=10s,end=30s\" and --inject "
            "\"worker=0,neighbor=4,start=20s,end=1m\" overlap: both inject neighbor on worker 0 "
            "from 20s to 30s (one injection of a kind per worker at a time)");
}

TEST(ValidateInjections, RejectsADelayBesideABwNeighborOnOneWorker) {
  EXPECT_TRUE(ValidateInjections(Parse({"worker=1,bwneighbor=800mbit", "worker=0,delay=5ms"}), 2).ok());
  Status s = ValidateInjections(Parse({"worker=1,bwneighbor=800mbit,end=20s",
                                       "worker=1,delay=5ms,start=10s"}), 2);
  EXPECT_EQ(s.message(),
            "--inject \"worker=1,bwneighbor=800mbit,end=20s\" and --inject "
            "\"worker=1,delay=5ms,start=10s\" overlap: both inject bwneighbor and delay on worker 1 "
            "from 10s to 20s (both shape the worker's side of its link)");
}

TEST(ValidateInjections, RejectsBwNeighborsWithDifferentLinks) {
  EXPECT_TRUE(ValidateInjections(Parse({"worker=0,bwneighbor=100mbit", "worker=1,bwneighbor=500mbit"}), 2).ok());
  Status s = ValidateInjections(
      Parse({"worker=0,bwneighbor=100mbit", "worker=1,bwneighbor=100mbit,link=200mbit"}), 2);
  EXPECT_EQ(s.message(),
            "--inject \"worker=1,bwneighbor=100mbit,link=200mbit\": link: must be the same for every "
            "bwneighbor (1gbit in --inject \"worker=0,bwneighbor=100mbit\"), got 200mbit");
}

TEST(ParseInjection, ABwNeighborTakesItsRateGuaranteeAndLink) {
  auto in = ParseInjection("worker=2,bwneighbor=800mbit,guarantee=100mbit,start=5s");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->kind, InjectionKind::kBwNeighbor);
  EXPECT_EQ(in->bwneighbor_bps, 800000000);
  EXPECT_EQ(in->bwneighbor_guarantee_bps, 100000000);
  EXPECT_EQ(in->link_bps, kDefaultLinkBps);
  EXPECT_EQ(in->start_seconds, 5);
  in = ParseInjection("worker=0,bwneighbor=150mbit,link=200mbit");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->link_bps, 200000000);
  EXPECT_EQ(in->bwneighbor_guarantee_bps, 0);
}

TEST(ParseInjection, ABandwidthWithAPeerShapesTheLinkBetweenTwoWorkers) {
  auto in = ParseInjection("worker=1,bandwidth=50mbit,peer=2,start=5s,end=20s");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->kind, InjectionKind::kBandwidth);
  EXPECT_EQ(in->bandwidth_bps, 50'000'000);
  ASSERT_TRUE(in->peer.has_value());
  EXPECT_EQ(*in->peer, 2);
  EXPECT_DOUBLE_EQ(in->start_seconds, 5);
  EXPECT_DOUBLE_EQ(*in->end_seconds, 20);
  in = ParseInjection("peer=0, worker=3, bandwidth=999mbit");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->peer, 0);
  // Without peer=P the whole link is shaped.
  in = ParseInjection("worker=1,bandwidth=50mbit");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_FALSE(in->peer.has_value());
}

TEST(ValidateInjections, RejectsAPeerBeyondTheJob) {
  EXPECT_TRUE(ValidateInjections(Parse({"worker=3,bandwidth=10mbit,peer=2"}), 4).ok());
  Status s = ValidateInjections(Parse({"worker=0,bandwidth=10mbit,peer=4"}), 4);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--inject \"worker=0,bandwidth=10mbit,peer=4\": peer: must be < 4 (the job's workers), got 4");
}

TEST(ValidateInjections, APeerLinkTakesBothWorkersUplinksWhileItLasts) {
  // Compute injections, disjoint windows and other workers' links do not clash with it.
  EXPECT_TRUE(ValidateInjections(Parse({"worker=1,bandwidth=10mbit,peer=2,end=10s",
                                        "worker=2,bwneighbor=100mbit,start=10s",
                                        "worker=1,cpu=0.5", "worker=2,neighbor=2",
                                        "worker=0,delay=5ms", "worker=4,bandwidth=10mbit,peer=3"}),
                                 5).ok());
  // A bwneighbor on the peer (the worker of the spec is not the one clashing).
  Status s = ValidateInjections(Parse({"worker=1,bandwidth=10mbit,peer=2,start=5s",
                                       "worker=2,bwneighbor=100mbit,end=30s"}), 3);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--inject \"worker=1,bandwidth=10mbit,peer=2,start=5s\" and --inject "
            "\"worker=2,bwneighbor=100mbit,end=30s\" overlap: both shape worker 2's link from 5s "
            "to 30s (a bandwidth with a peer holds both workers' uplinks)");
  // A delay, a plain bandwidth or another peer link on either worker.
  for (const char* other : {"worker=0,delay=5ms", "worker=1,bandwidth=20mbit",
                            "worker=1,bandwidth=20mbit,peer=0", "worker=2,bandwidth=20mbit,peer=1"}) {
    s = ValidateInjections(Parse({other, "worker=0,bandwidth=10mbit,peer=1"}), 3);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << other;
    EXPECT_NE(s.message().find("overlap: both shape worker"), std::string::npos) << s;
  }
}

TEST(ValidateInjections, APeersBandwidthMustBeBelowTheBwNeighborsLink) {
  EXPECT_TRUE(ValidateInjections(Parse({"worker=0,bwneighbor=10mbit,link=100mbit",
                                        "worker=1,bandwidth=99mbit,peer=2"}), 3).ok());
  Status s = ValidateInjections(Parse({"worker=1,bandwidth=100mbit,peer=2",
                                       "worker=0,bwneighbor=10mbit,link=100mbit"}), 3);
  EXPECT_EQ(s.message(),
            "--inject \"worker=1,bandwidth=100mbit,peer=2\": bandwidth: must be below the workers' "
            "uplink rate (100mbit, the link of --inject \"worker=0,bwneighbor=10mbit,link=100mbit\"), "
            "got 100mbit");
}

TEST(ValidateInjections, ADelayWithAPeerIsOnAPipelineLinkAndClashesOnlyWithOneOnTheSameLink) {
  // It shapes no uplink: a bandwidth or another link's delay on the same workers is fine.
  const auto delays = Parse({"worker=1,delay=50ms,peer=2", "worker=1,bandwidth=10mbit", "worker=2,delay=5ms,peer=3"});
  EXPECT_TRUE(ValidateInjections(delays, 4).ok());
  EXPECT_TRUE(ValidateLinkDelays(delays, 4).ok());
  Status s = ValidateInjections(Parse({"worker=1,delay=50ms,peer=2", "worker=2,delay=5ms,peer=1"}), 4);
  EXPECT_NE(s.message().find("overlap: both delay the link between workers 2 and 1"), std::string::npos) << s;
  // Neighbouring stages of one replica only (2 replicas of 2 stages: 1 and 2 are not).
  EXPECT_EQ(ValidateLinkDelays(Parse({"worker=1,delay=50ms,peer=2"}), 2).message(),
            "--inject \"worker=1,delay=50ms,peer=2\": peer: worker 2 is not a neighbouring stage of worker 1 "
            "(2 stages)");
  EXPECT_EQ(ValidateLinkDelays(Parse({"worker=0,delay=50ms,peer=1"}), 1).message(),
            "--inject \"worker=0,delay=50ms,peer=1\": peer: a delay with peer is on a pipeline link; the job "
            "has one stage");
  EXPECT_TRUE(ValidateLinkDelays(Parse({"worker=2,delay=50ms,peer=3"}), 2).ok());
}

TEST(LinkDelayEnv, NamesThePeerAndTheSecondsOnBothEnds) {
  const auto delays = Parse({"worker=1,delay=50ms,peer=2", "worker=0,delay=2ms,peer=1", "worker=1,cpu=0.5"});
  EXPECT_EQ(LinkDelayEnv(delays, 1), "2:0.05,0:0.002");
  EXPECT_EQ(LinkDelayEnv(delays, 2), "1:0.05");
  EXPECT_EQ(LinkDelayEnv(delays, 3), "");
}

TEST(ValidateInjections, NeedsAtLeastOneWorker) {
  EXPECT_EQ(ValidateInjections({}, 0).message(), "workers: must be >= 1, got 0");
}

}  // namespace
}  // namespace star::local
