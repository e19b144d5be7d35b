// NodeAllocation (cluster-scoped, name = node name): the CPU and bandwidth each pod on
// a node should get. Written by the controller, applied by the node agent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/meta.h"  // Condition
#include "star/core/api/node_headroom.h"
#include "star/core/status.h"

namespace star::api {

// Bounds of a NodeAllocation (the CRD states the same):
// at most kMaxNodePods entries in spec.pods and status.applied;
inline constexpr size_t kMaxNodePods = 1024;
// a pod uid of at most kMaxUidLength characters;
inline constexpr size_t kMaxUidLength = 128;
// a CFS quota of at most 10000 CPUs, so quota * period (<= 1 s, in ns) fits int64;
inline constexpr int64_t kMaxQuotaMillicores = 10'000'000;
// a rate of at most 10 Tbit/s.
inline constexpr int64_t kMaxBitsPerSecond = 10'000'000'000'000;

struct CpuAllocation {
  int64_t quota_millicores = 0;  // CFS quota as millicores, <= kMaxQuotaMillicores; 0 = unlimited
  int64_t weight = 100;          // relative share (cgroup v2 cpu.weight scale, 1..10000)

  friend bool operator==(const CpuAllocation&, const CpuAllocation&) = default;
};

struct NetworkAllocation {
  int64_t egress_bits_per_second = 0;   // <= kMaxBitsPerSecond; 0 = unlimited
  int64_t ingress_bits_per_second = 0;  // <= kMaxBitsPerSecond; 0 = unlimited
  int priority = 0;                     // tc priority, 0 (highest) .. 7

  friend bool operator==(const NetworkAllocation&, const NetworkAllocation&) = default;
};

struct PodAllocation {
  std::string namespace_;  // wire: "namespace"
  std::string name;
  std::string uid;
  CpuAllocation cpu;
  NetworkAllocation network;
  bool guaranteed = false;  // never throttle below its request

  friend bool operator==(const PodAllocation&, const PodAllocation&) = default;
};

struct NodeAllocationSpec {
  std::vector<PodAllocation> pods;

  friend bool operator==(const NodeAllocationSpec&, const NodeAllocationSpec&) = default;
};

struct AppliedPod {
  std::string namespace_;
  std::string name;
  std::string uid;
  CpuAllocation cpu;
  NetworkAllocation network;

  friend bool operator==(const AppliedPod&, const AppliedPod&) = default;
};

struct NodeUsage {
  double cpu_millicores = 0;
  double egress_bits_per_second = 0;
  double ingress_bits_per_second = 0;

  friend bool operator==(const NodeUsage&, const NodeUsage&) = default;
};

struct NodeAllocationStatus {
  int64_t observed_generation = 0;
  std::vector<AppliedPod> applied;
  std::vector<Condition> conditions;
  std::optional<NodeUsage> usage;
  std::optional<NodeHeadroom> headroom;  // the node's CPU and NIC, used and capacity

  friend bool operator==(const NodeAllocationStatus&, const NodeAllocationStatus&) = default;
};

struct NodeAllocation {
  std::string name;              // metadata.name: the node's name (DNS-1123 subdomain)
  int64_t generation = 0;        // metadata.generation; 0 until the API server set it
  std::string resource_version;  // metadata.resourceVersion; "" when unknown
  NodeAllocationSpec spec;
  NodeAllocationStatus status;

  friend bool operator==(const NodeAllocation&, const NodeAllocation&) = default;
};

// Kubernetes object form: {"apiVersion":"star.dev/v1alpha1","kind":"NodeAllocation",
// "metadata":{"name":...},"spec":{...},"status":{...}} with camelCase field names:
//   spec.pods[]: namespace, name, uid, cpu {quotaMillicores, weight},
//                network {egressBitsPerSecond, ingressBitsPerSecond, priority}, guaranteed
//   status: observedGeneration, applied[] (as pods, without guaranteed), conditions[],
//           usage {cpuMillicores, egressBitsPerSecond, ingressBitsPerSecond},
//           headroom (star/core/api/node_headroom.h)
// ToJson writes every spec field (defaults included), metadata.generation and
// resourceVersion only when set, and "status" only when it is not empty
// (observedGeneration != 0, or applied/conditions non-empty, or usage or headroom set).
nlohmann::json ToJson(const NodeAllocation& a);
// Decodes and validates a whole object. apiVersion and kind, when present, must match;
// metadata.name is required (other metadata fields are ignored); spec is required,
// status optional. Defaults on decode: cpu.quotaMillicores 0, cpu.weight 100, network
// rates 0, network.priority 0, guaranteed false; a missing cpu/network object takes
// all its defaults. Unknown fields in spec/status are rejected. Errors name the field
// path ("spec.pods[3].uid: duplicate of spec.pods[1]").
StatusOr<NodeAllocation> NodeAllocationFromJson(const nlohmann::json& j);

nlohmann::json ToJson(const NodeAllocationSpec& s);
StatusOr<NodeAllocationSpec> NodeAllocationSpecFromJson(const nlohmann::json& j,
                                                        const std::string& path = "spec");
nlohmann::json ToJson(const NodeAllocationStatus& s);
StatusOr<NodeAllocationStatus> NodeAllocationStatusFromJson(const nlohmann::json& j,
                                                            const std::string& path = "status");

// Checks a spec built in code or decoded: at most kMaxNodePods pods; per pod, namespace
// is a DNS-1123 label, name a DNS-1123 subdomain, uid non-empty, at most kMaxUidLength
// characters and unique across pods; quotaMillicores in [0, kMaxQuotaMillicores]; rates
// in [0, kMaxBitsPerSecond]; weight in [1, 10000]; priority in [0, 7]. O(pods^2) for the
// uid check (pods per node are few). `path` prefixes field paths in errors.
[[nodiscard]] Status Validate(const NodeAllocationSpec& s, const std::string& path = "spec");

}  // namespace star::api
