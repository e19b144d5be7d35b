// NodeAllocation (cluster-scoped, name = node name): the CPU and bandwidth each pod on
// a node should get. Written by the controller, applied by the node agent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/status.h"

namespace star::api {

struct CpuAllocation {
  int64_t quota_millicores = 0;  // CFS quota as millicores; 0 = unlimited
  int64_t weight = 100;          // relative share (cgroup v2 cpu.weight scale, 1..10000)
};

struct NetworkAllocation {
  int64_t egress_bits_per_second = 0;   // 0 = unlimited
  int64_t ingress_bits_per_second = 0;  // 0 = unlimited
  int priority = 0;                     // tc priority, 0 (highest) .. 7
};

struct PodAllocation {
  std::string namespace_;  // wire: "namespace"
  std::string name;
  std::string uid;
  CpuAllocation cpu;
  NetworkAllocation network;
  bool guaranteed = false;  // never throttle below its request
};

struct NodeAllocationSpec {
  std::vector<PodAllocation> pods;
};

struct AppliedPod {
  std::string namespace_;
  std::string name;
  std::string uid;
  CpuAllocation cpu;
  NetworkAllocation network;
};

struct Condition {
  std::string type;
  std::string status;  // "True" | "False" | "Unknown"
  std::string reason;
  std::string message;
  std::string last_transition_time;  // RFC 3339
  int64_t observed_generation = 0;
};

struct NodeUsage {
  double cpu_millicores = 0;
  double egress_bits_per_second = 0;
  double ingress_bits_per_second = 0;
};

struct NodeAllocationStatus {
  int64_t observed_generation = 0;
  std::vector<AppliedPod> applied;
  std::vector<Condition> conditions;
  std::optional<NodeUsage> usage;
};

struct NodeAllocation {
  std::string name;  // metadata.name: the node's name
  int64_t generation = 0;
  NodeAllocationSpec spec;
  NodeAllocationStatus status;
};

// Kubernetes object form: {"apiVersion":"star.dev/v1alpha1","kind":"NodeAllocation",
// "metadata":{"name":...},"spec":{...},"status":{...}} with camelCase field names.
nlohmann::json ToJson(const NodeAllocation& a);
StatusOr<NodeAllocation> NodeAllocationFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const NodeAllocationSpec& s);
StatusOr<NodeAllocationSpec> NodeAllocationSpecFromJson(const nlohmann::json& j,
                                                        const std::string& path = "spec");

}  // namespace star::api
