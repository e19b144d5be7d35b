// What a node has left of its CPU and its NIC: used and capacity, as the node agent samples
// them (the node's CPU time in /proc/stat; the interface's byte counters and link speed).
// The agent publishes it in its NodeAllocation's status.headroom every few seconds; the
// operator reads it to place parameter servers where their load fits.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "star/core/status.h"

namespace star::api {

struct NodeHeadroom {
  std::string sampled_at;  // RFC 3339: the end of the sampled interval
  double interval_seconds = 0;  // how long the sample spans (> 0)
  // CPU: the node's online CPUs, and what every process on the node used over the interval.
  double cpu_capacity_millicores = 0;  // > 0
  double cpu_used_millicores = 0;      // >= 0 (the agent keeps it within capacity)
  // The NIC ("" and all 0 when the agent samples none). Capacity 0: unknown (an interface
  // that reports no speed, and no --nic-capacity): its headroom is then unknown too.
  std::string interface;  // at most 15 characters
  double nic_capacity_bits_per_second = 0;
  double egress_bits_per_second = 0;
  double ingress_bits_per_second = 0;

  friend bool operator==(const NodeHeadroom&, const NodeHeadroom&) = default;
};

// Free CPU in millicores (never below 0).
[[nodiscard]] double CpuHeadroomMillicores(const NodeHeadroom& h);
// Free bits per second on the NIC in the busier direction (a full-duplex link has the
// capacity each way); nullopt when the capacity is unknown.
[[nodiscard]] std::optional<double> NicHeadroomBitsPerSecond(const NodeHeadroom& h);

// JSON form, camelCase: {sampledAt, intervalSeconds, cpu {capacityMillicores,
// usedMillicores}, network {interface, capacityBitsPerSecond, egressBitsPerSecond,
// ingressBitsPerSecond}}; network only when an interface is sampled.
nlohmann::json ToJson(const NodeHeadroom& h);
// Decodes and validates; errors name the field below `path` ("status.headroom.cpu.
// usedMillicores: must be >= 0, got -1"). Unknown fields are rejected.
StatusOr<NodeHeadroom> NodeHeadroomFromJson(const nlohmann::json& j, const std::string& path);

}  // namespace star::api
