#include "star/core/api/node_allocation.h"

#include <functional>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace star::api {
namespace {

using nlohmann::json;

json FullAllocation() {
  return json::parse(R"({
    "apiVersion": "star.dev/v1alpha1",
    "kind": "NodeAllocation",
    "metadata": {"name": "node-a.cluster.local", "generation": 5, "resourceVersion": "812"},
    "spec": {"pods": [
      {"namespace": "ml", "name": "fmnist-worker-0", "uid": "u0",
       "cpu": {"quotaMillicores": 2000, "weight": 200},
       "network": {"egressBitsPerSecond": 100000000, "ingressBitsPerSecond": 0, "priority": 1},
       "guaranteed": true},
      {"namespace": "ml", "name": "fmnist-worker-1", "uid": "u1",
       "cpu": {"quotaMillicores": 0, "weight": 100},
       "network": {"egressBitsPerSecond": 0, "ingressBitsPerSecond": 0, "priority": 0},
       "guaranteed": false},
      {"namespace": "other", "name": "batch-job", "uid": "u2",
       "cpu": {"quotaMillicores": 500, "weight": 1},
       "network": {"egressBitsPerSecond": 20000000, "ingressBitsPerSecond": 20000000,
                   "priority": 7},
       "guaranteed": false},
      {"namespace": "other", "name": "batch-job-2", "uid": "u3",
       "cpu": {"quotaMillicores": 500, "weight": 10000},
       "network": {"egressBitsPerSecond": 0, "ingressBitsPerSecond": 0, "priority": 3},
       "guaranteed": false}
    ]},
    "status": {
      "observedGeneration": 4,
      "applied": [{"namespace": "ml", "name": "fmnist-worker-0", "uid": "u0",
                   "cpu": {"quotaMillicores": 1500, "weight": 150},
                   "network": {"egressBitsPerSecond": 0, "ingressBitsPerSecond": 0,
                               "priority": 0}}],
      "conditions": [{"type": "Applied", "status": "False", "reason": "TcError",
                      "message": "qdisc add failed", "lastTransitionTime": "2024-05-01T12:00:00Z",
                      "observedGeneration": 4}],
      "usage": {"cpuMillicores": 3500.5, "egressBitsPerSecond": 1.5e7, "ingressBitsPerSecond": 0},
      "headroom": {"sampledAt": "2024-05-01T12:00:05Z", "intervalSeconds": 5,
                   "cpu": {"capacityMillicores": 8000, "usedMillicores": 3600.5},
                   "network": {"interface": "eth0", "capacityBitsPerSecond": 1e10,
                               "egressBitsPerSecond": 2.5e8, "ingressBitsPerSecond": 1e6}}
    }
  })");
}

TEST(NodeAllocation, FullDocumentRoundTripsExactly) {
  const json doc = FullAllocation();
  auto a = NodeAllocationFromJson(doc);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->name, "node-a.cluster.local");
  EXPECT_EQ(a->generation, 5);
  EXPECT_EQ(a->resource_version, "812");
  ASSERT_EQ(a->spec.pods.size(), 4u);
  EXPECT_EQ(a->spec.pods[0].namespace_, "ml");
  EXPECT_EQ(a->spec.pods[0].cpu.quota_millicores, 2000);
  EXPECT_EQ(a->spec.pods[0].network.egress_bits_per_second, 100000000);
  EXPECT_TRUE(a->spec.pods[0].guaranteed);
  EXPECT_EQ(a->status.observed_generation, 4);
  ASSERT_EQ(a->status.applied.size(), 1u);
  EXPECT_EQ(a->status.applied[0].cpu.weight, 150);
  ASSERT_TRUE(a->status.usage.has_value());
  EXPECT_DOUBLE_EQ(a->status.usage->cpu_millicores, 3500.5);
  ASSERT_TRUE(a->status.headroom.has_value());
  EXPECT_EQ(a->status.headroom->interface, "eth0");
  EXPECT_DOUBLE_EQ(a->status.headroom->cpu_used_millicores, 3600.5);
  EXPECT_EQ(ToJson(*a), doc) << ToJson(*a).dump(2);
}

TEST(NodeAllocation, StructWithEveryFieldSetRoundTrips) {
  NodeAllocation a;
  a.name = "n1";
  a.generation = 2;
  a.resource_version = "7";
  a.spec.pods = {{"ns", "p0", "uid-0", {1000, 50}, {10, 20, 2}, true},
                 {"ns", "p1", "uid-1", {0, 100}, {0, 0, 0}, false}};
  a.status.observed_generation = 2;
  a.status.applied = {{"ns", "p0", "uid-0", {1000, 50}, {10, 20, 2}}};
  a.status.conditions = {{"Applied", "True", "Synced", "ok", "2024-01-01T00:00:00+00:00", 2}};
  a.status.usage = NodeUsage{1.5, 2.5, 3.5};
  a.status.headroom = NodeHeadroom{"2024-01-01T00:00:05Z", 5, 4000, 250.5, "ens3", 1e9, 2e6, 3e6};
  auto back = NodeAllocationFromJson(ToJson(a));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);

  auto spec = NodeAllocationSpecFromJson(ToJson(a.spec));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(*spec, a.spec);
  auto status = NodeAllocationStatusFromJson(ToJson(a.status));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, a.status);
}

TEST(NodeAllocation, DefaultsAreAppliedAndEmptyStatusIsOmitted) {
  auto a = NodeAllocationFromJson(json::parse(R"({
    "metadata": {"name": "n1"},
    "spec": {"pods": [{"namespace": "ml", "name": "w0", "uid": "u"}]}
  })"));
  ASSERT_TRUE(a.ok()) << a.status();
  const PodAllocation& p = a->spec.pods[0];
  EXPECT_EQ(p.cpu, (CpuAllocation{0, 100}));
  EXPECT_EQ(p.network, (NetworkAllocation{0, 0, 0}));
  EXPECT_FALSE(p.guaranteed);
  EXPECT_EQ(a->status, NodeAllocationStatus{});
  const json out = ToJson(*a);
  EXPECT_FALSE(out.contains("status"));
  EXPECT_EQ(out["metadata"], json({{"name", "n1"}}));
  EXPECT_EQ(out["spec"]["pods"][0]["cpu"], json({{"quotaMillicores", 0}, {"weight", 100}}));

  auto empty = NodeAllocationSpecFromJson(json::object());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->pods.empty());
}

struct BadCase {
  std::string name;
  std::function<void(json&)> mutate;
  std::string want;
};

class NodeAllocationRejects : public testing::TestWithParam<BadCase> {};

TEST_P(NodeAllocationRejects, WithExactFieldPath) {
  json doc = FullAllocation();
  GetParam().mutate(doc);
  auto a = NodeAllocationFromJson(doc);
  ASSERT_FALSE(a.ok()) << "accepted: " << doc.dump();
  EXPECT_EQ(a.status().message(), GetParam().want);
}

json& Pod(json& d, int i) { return d["spec"]["pods"][i]; }

INSTANTIATE_TEST_SUITE_P(
    Table, NodeAllocationRejects,
    testing::Values(
        BadCase{"WrongKind", [](json& d) { d["kind"] = "TrainingJob"; },
                "kind: must be \"NodeAllocation\", got \"TrainingJob\""},
        BadCase{"WrongApiVersion", [](json& d) { d["apiVersion"] = "v1"; },
                "apiVersion: must be \"star.dev/v1alpha1\", got \"v1\""},
        BadCase{"MissingMetadata", [](json& d) { d.erase("metadata"); },
                "metadata: required field is missing"},
        BadCase{"BadNodeName", [](json& d) { d["metadata"]["name"] = "Node_A"; },
                "metadata.name: must be a DNS-1123 subdomain (at most 253 characters of "
                "dot-separated DNS-1123 labels), got \"Node_A\""},
        BadCase{"MissingSpec", [](json& d) { d.erase("spec"); }, "spec: required field is missing"},
        BadCase{"UnknownSpecField", [](json& d) { d["spec"]["pod"] = json::array(); },
                "spec.pod: unknown field"},
        BadCase{"PodsNotArray", [](json& d) { d["spec"]["pods"] = json::object(); },
                "spec.pods: must be an array, got object"},
        BadCase{"PodNotObject", [](json& d) { Pod(d, 1) = "w1"; },
                "spec.pods[1]: must be an object, got string"},
        BadCase{"MissingUid", [](json& d) { Pod(d, 2).erase("uid"); },
                "spec.pods[2].uid: required field is missing"},
        BadCase{"EmptyUid", [](json& d) { Pod(d, 2)["uid"] = ""; },
                "spec.pods[2].uid: must not be empty"},
        BadCase{"DuplicateUid", [](json& d) { Pod(d, 3)["uid"] = "u1"; },
                "spec.pods[3].uid: duplicate of spec.pods[1]"},
        BadCase{"MissingNamespace", [](json& d) { Pod(d, 0).erase("namespace"); },
                "spec.pods[0].namespace: required field is missing"},
        BadCase{"EmptyNamespace", [](json& d) { Pod(d, 0)["namespace"] = ""; },
                "spec.pods[0].namespace: must be a DNS-1123 label (at most 63 lowercase letters, "
                "digits or '-', starting and ending with a letter or digit), got \"\""},
        BadCase{"BadPodName", [](json& d) { Pod(d, 0)["name"] = "Worker 0"; },
                "spec.pods[0].name: must be a DNS-1123 subdomain (at most 253 characters of "
                "dot-separated DNS-1123 labels), got \"Worker 0\""},
        BadCase{"NegativeQuota", [](json& d) { Pod(d, 1)["cpu"]["quotaMillicores"] = -1; },
                "spec.pods[1].cpu.quotaMillicores: must be >= 0, got -1"},
        BadCase{"ZeroWeight", [](json& d) { Pod(d, 1)["cpu"]["weight"] = 0; },
                "spec.pods[1].cpu.weight: must be >= 1, got 0"},
        BadCase{"WeightTooLarge", [](json& d) { Pod(d, 1)["cpu"]["weight"] = 10001; },
                "spec.pods[1].cpu.weight: must be <= 10000, got 10001"},
        BadCase{"QuotaNotInteger", [](json& d) { Pod(d, 1)["cpu"]["quotaMillicores"] = "2"; },
                "spec.pods[1].cpu.quotaMillicores: must be an integer, got string"},
        BadCase{"UnknownCpuField", [](json& d) { Pod(d, 1)["cpu"]["shares"] = 2; },
                "spec.pods[1].cpu.shares: unknown field"},
        BadCase{"CpuNotObject", [](json& d) { Pod(d, 1)["cpu"] = 2; },
                "spec.pods[1].cpu: must be an object, got integer"},
        BadCase{"NegativeEgress", [](json& d) { Pod(d, 0)["network"]["egressBitsPerSecond"] = -1; },
                "spec.pods[0].network.egressBitsPerSecond: must be >= 0, got -1"},
        BadCase{"NegativeIngress",
                [](json& d) { Pod(d, 0)["network"]["ingressBitsPerSecond"] = -8; },
                "spec.pods[0].network.ingressBitsPerSecond: must be >= 0, got -8"},
        BadCase{"PriorityTooHigh", [](json& d) { Pod(d, 0)["network"]["priority"] = 8; },
                "spec.pods[0].network.priority: must be <= 7, got 8"},
        BadCase{"NegativePriority", [](json& d) { Pod(d, 0)["network"]["priority"] = -1; },
                "spec.pods[0].network.priority: must be >= 0, got -1"},
        BadCase{"GuaranteedNotBool", [](json& d) { Pod(d, 0)["guaranteed"] = "true"; },
                "spec.pods[0].guaranteed: must be a boolean, got string"},
        BadCase{"UnknownPodField", [](json& d) { Pod(d, 0)["memory"] = 1; },
                "spec.pods[0].memory: unknown field"},
        BadCase{"NegativeObservedGeneration",
                [](json& d) { d["status"]["observedGeneration"] = -1; },
                "status.observedGeneration: must be >= 0, got -1"},
        BadCase{"AppliedBadWeight", [](json& d) { d["status"]["applied"][0]["cpu"]["weight"] = 0; },
                "status.applied[0].cpu.weight: must be >= 1, got 0"},
        BadCase{"AppliedHasGuaranteed",
                [](json& d) { d["status"]["applied"][0]["guaranteed"] = true; },
                "status.applied[0].guaranteed: unknown field"},
        BadCase{"ConditionMissingType", [](json& d) { d["status"]["conditions"][0].erase("type"); },
                "status.conditions[0].type: required field is missing"},
        BadCase{"ConditionBadTime",
                [](json& d) {
                  d["status"]["conditions"][0]["lastTransitionTime"] = "2024-13-01T00:00:00Z";
                },
                "status.conditions[0].lastTransitionTime: must be an RFC 3339 date-time, got "
                "\"2024-13-01T00:00:00Z\""},
        BadCase{"NegativeUsage", [](json& d) { d["status"]["usage"]["cpuMillicores"] = -1; },
                "status.usage.cpuMillicores: must be >= 0, got -1"},
        BadCase{"UnknownUsageField", [](json& d) { d["status"]["usage"]["memoryBytes"] = 1; },
                "status.usage.memoryBytes: unknown field"},
        BadCase{"HeadroomWithoutCpu", [](json& d) { d["status"]["headroom"].erase("cpu"); },
                "status.headroom.cpu: required field is missing"},
        BadCase{"HeadroomNegativeEgress",
                [](json& d) { d["status"]["headroom"]["network"]["egressBitsPerSecond"] = -1; },
                "status.headroom.network.egressBitsPerSecond: must be >= 0, got -1"},
        BadCase{"UnknownStatusField", [](json& d) { d["status"]["phase"] = "Ready"; },
                "status.phase: unknown field"},
        // bounds: quota * CFS period must fit int64 in the agent
        BadCase{"QuotaAboveMaximum",
                [](json& d) { Pod(d, 0)["cpu"]["quotaMillicores"] = 10000001; },
                "spec.pods[0].cpu.quotaMillicores: must be <= 10000000, got 10000001"},
        BadCase{"QuotaNearInt64Maximum",
                [](json& d) { Pod(d, 0)["cpu"]["quotaMillicores"] = int64_t{1} << 53; },
                "spec.pods[0].cpu.quotaMillicores: must be <= 10000000, got 9007199254740992"},
        BadCase{"EgressAboveMaximum",
                [](json& d) { Pod(d, 0)["network"]["egressBitsPerSecond"] = 10000000000001; },
                "spec.pods[0].network.egressBitsPerSecond: must be <= 10000000000000, got "
                "10000000000001"},
        BadCase{"IngressAboveMaximum",
                [](json& d) { Pod(d, 0)["network"]["ingressBitsPerSecond"] = 10000000000001; },
                "spec.pods[0].network.ingressBitsPerSecond: must be <= 10000000000000, got "
                "10000000000001"},
        BadCase{"AppliedQuotaAboveMaximum",
                [](json& d) { d["status"]["applied"][0]["cpu"]["quotaMillicores"] = 10000001; },
                "status.applied[0].cpu.quotaMillicores: must be <= 10000000, got 10000001"},
        BadCase{"UidTooLong", [](json& d) { Pod(d, 0)["uid"] = std::string(129, 'u'); },
                "spec.pods[0].uid: must be at most 128 characters, got 129"},
        BadCase{"TooManyPods",
                [](json& d) {
                  json pods = json::array();
                  for (int i = 0; i < 1025; ++i) {
                    pods.push_back({{"namespace", "ns"}, {"name", "p"}, {"uid", std::to_string(i)}});
                  }
                  d["spec"]["pods"] = pods;
                },
                "spec.pods: must have at most 1024 items, got 1025"},
        BadCase{"TooManyApplied",
                [](json& d) {
                  d["status"]["applied"] = std::vector<json>(1025, d["status"]["applied"][0]);
                },
                "status.applied: must have at most 1024 items, got 1025"},
        BadCase{"UnknownTopLevel", [](json& d) { d["data"] = 1; }, "data: unknown field"}),
    [](const testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(NodeAllocation, ValidateChecksStructsBuiltInCode) {
  NodeAllocationSpec s;
  s.pods = {{"ns", "p0", "a", {}, {}, false}, {"ns", "p1", "b", {}, {}, false}};
  EXPECT_TRUE(Validate(s).ok()) << Validate(s);
  s.pods[1].uid = "a";
  EXPECT_EQ(Validate(s, "alloc").message(), "alloc.pods[1].uid: duplicate of alloc.pods[0]");
  s.pods[1].uid = "b";
  s.pods[0].cpu.weight = 0;
  EXPECT_EQ(Validate(s).message(), "spec.pods[0].cpu.weight: must be >= 1, got 0");
  s.pods[0].cpu.weight = 1;
  s.pods[0].cpu.quota_millicores = kMaxQuotaMillicores + 1;
  EXPECT_EQ(Validate(s).message(),
            "spec.pods[0].cpu.quotaMillicores: must be <= 10000000, got 10000001");
  s.pods[0].cpu.quota_millicores = kMaxQuotaMillicores;
  EXPECT_TRUE(Validate(s).ok());
  s.pods.resize(kMaxNodePods + 1, s.pods[1]);
  EXPECT_EQ(Validate(s).message(), "spec.pods: must have at most 1024 items, got 1025");
}

// The agent turns a quota into cgroup time: quota * period (at most 1 s, in ns) / 1000.
TEST(NodeAllocation, LargestQuotaTimesLargestPeriodFitsInt64) {
  constexpr int64_t kMaxPeriodNanos = 1'000'000'000;
  EXPECT_LE(kMaxQuotaMillicores, std::numeric_limits<int64_t>::max() / kMaxPeriodNanos);
}

}  // namespace
}  // namespace star::api
