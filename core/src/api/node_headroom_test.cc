#include "star/core/api/node_headroom.h"

#include <functional>
#include <string>

#include <gtest/gtest.h>

namespace star::api {
namespace {

using nlohmann::json;

NodeHeadroom Sample() {
  return NodeHeadroom{"2026-01-02T03:04:05Z", 5, 4000, 1000, "eth0", 1e9, 6e8, 2e8};
}

TEST(NodeHeadroom, FreeCpuAndTheBusierDirectionOfTheNic) {
  const NodeHeadroom h = Sample();
  EXPECT_DOUBLE_EQ(CpuHeadroomMillicores(h), 3000);
  ASSERT_TRUE(NicHeadroomBitsPerSecond(h).has_value());
  EXPECT_DOUBLE_EQ(*NicHeadroomBitsPerSecond(h), 4e8);  // egress is the busier way

  NodeHeadroom unknown = h;
  unknown.nic_capacity_bits_per_second = 0;
  EXPECT_FALSE(NicHeadroomBitsPerSecond(unknown).has_value());
  NodeHeadroom saturated = h;
  saturated.ingress_bits_per_second = 2e9;  // counters may run past a reported speed
  EXPECT_DOUBLE_EQ(*NicHeadroomBitsPerSecond(saturated), 0);
}

TEST(NodeHeadroom, RoundTripsWithAndWithoutAnInterface) {
  const NodeHeadroom h = Sample();
  auto back = NodeHeadroomFromJson(ToJson(h), "headroom");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, h);

  NodeHeadroom cpu_only = h;
  cpu_only.interface = "";
  cpu_only.nic_capacity_bits_per_second = cpu_only.egress_bits_per_second =
      cpu_only.ingress_bits_per_second = 0;
  const json j = ToJson(cpu_only);
  EXPECT_FALSE(j.contains("network")) << j.dump();
  auto cpu_back = NodeHeadroomFromJson(j, "headroom");
  ASSERT_TRUE(cpu_back.ok()) << cpu_back.status();
  EXPECT_EQ(*cpu_back, cpu_only);
}

struct BadCase {
  const char* name;
  std::function<void(json&)> mutate;
  const char* error;
};

class NodeHeadroomBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(NodeHeadroomBadTest, IsRefusedNamingTheField) {
  json j = ToJson(Sample());
  GetParam().mutate(j);
  auto h = NodeHeadroomFromJson(j, "status.headroom");
  ASSERT_FALSE(h.ok()) << j.dump();
  EXPECT_EQ(h.status().message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, NodeHeadroomBadTest,
    ::testing::Values(
        BadCase{"NoTime", [](json& j) { j.erase("sampledAt"); },
                "status.headroom.sampledAt: required field is missing"},
        BadCase{"BadTime", [](json& j) { j["sampledAt"] = "yesterday"; },
                "status.headroom.sampledAt: must be an RFC 3339 date-time, got \"yesterday\""},
        BadCase{"ZeroInterval", [](json& j) { j["intervalSeconds"] = 0; },
                "status.headroom.intervalSeconds: must be > 0, got 0"},
        BadCase{"NoCpu", [](json& j) { j.erase("cpu"); }, "status.headroom.cpu: required field is missing"},
        BadCase{"ZeroCpuCapacity", [](json& j) { j["cpu"]["capacityMillicores"] = 0; },
                "status.headroom.cpu.capacityMillicores: must be > 0, got 0"},
        BadCase{"NegativeUsed", [](json& j) { j["cpu"]["usedMillicores"] = -1; },
                "status.headroom.cpu.usedMillicores: must be >= 0, got -1"},
        BadCase{"LongInterface", [](json& j) { j["network"]["interface"] = "a-sixteen-chars!"; },
                "status.headroom.network.interface: must be at most 15 characters, got 16"},
        BadCase{"EmptyInterface", [](json& j) { j["network"]["interface"] = ""; },
                "status.headroom.network.interface: must not be empty"},
        BadCase{"NegativeCapacity", [](json& j) { j["network"]["capacityBitsPerSecond"] = -5; },
                "status.headroom.network.capacityBitsPerSecond: must be >= 0, got -5"},
        BadCase{"IngressAsText", [](json& j) { j["network"]["ingressBitsPerSecond"] = "1G"; },
                "status.headroom.network.ingressBitsPerSecond: must be a number, got string"},
        BadCase{"UnknownCpuField", [](json& j) { j["cpu"]["steal"] = 1; },
                "status.headroom.cpu.steal: unknown field"},
        BadCase{"UnknownField", [](json& j) { j["memory"] = 1; },
                "status.headroom.memory: unknown field"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace star::api
