// A pod's bandwidth as Kubernetes users already declare it: the annotations
// kubernetes.io/egress-bandwidth and kubernetes.io/ingress-bandwidth (the CNI bandwidth
// plugin's), each a quantity of bits per second like "800M", "1G" or "100Mi". STAR takes
// them as the pod's bandwidth allocation: the node agent shapes the pod to it, and the
// operator may move bandwidth between co-located pods that declare it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "star/core/api/node_allocation.h"
#include "star/core/status.h"

namespace star::api {

inline constexpr char kEgressBandwidthAnnotation[] = "kubernetes.io/egress-bandwidth";
inline constexpr char kIngressBandwidthAnnotation[] = "kubernetes.io/ingress-bandwidth";

// Parses a bandwidth quantity: "<decimal>[k|M|G|T|Ki|Mi|Gi|Ti]" (a JSON number is bits
// per second). nullopt when malformed, below 1 bit/s or above kMaxBitsPerSecond.
std::optional<int64_t> ParseBitsPerSecond(const nlohmann::json& quantity);

// The network allocation `annotations` (an object's metadata.annotations; null or
// absent = none) declare; priority 0. An error names `path`'s offending key.
StatusOr<NetworkAllocation> PodBandwidth(const nlohmann::json& annotations, const std::string& path);

}  // namespace star::api
