// The node's headroom from two HostCounters readings, and when the agent writes it to its
// NodeAllocation's status.headroom: every `interval` at most, and only when something moved
// by `change` of its capacity or the last write is `refresh` old. Writes per node are so
// bounded by 1/interval, and a steady node costs one write per `refresh`.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "star/agent/host_counters.h"
#include "star/core/api/node_headroom.h"

namespace star::agent {

// What the node used between `before` and `after` (after.at later than before.at; counters
// that went backwards, a reset, count as 0). `nic_capacity_bits_per_second` 0 = unknown;
// `interface` "" = no NIC sampled. `sampled_at` is RFC 3339.
[[nodiscard]] api::NodeHeadroom HeadroomBetween(const HostCounters& before,
                                                const HostCounters& after,
                                                const std::string& interface,
                                                double nic_capacity_bits_per_second,
                                                const std::string& sampled_at);

struct HeadroomOptions {
  std::chrono::milliseconds interval{5000};  // the least time between two writes
  std::chrono::milliseconds refresh{30000};  // the most time between two writes
  double change = 0.05;                      // a fraction of the capacity
};

// Whether `now` is to be written at `t`, given what was last written (`written`, at
// `written_at`; nullopt: nothing yet).
[[nodiscard]] bool ShouldWriteHeadroom(const std::optional<api::NodeHeadroom>& written,
                                       std::chrono::steady_clock::time_point written_at,
                                       const api::NodeHeadroom& now,
                                       std::chrono::steady_clock::time_point t,
                                       const HeadroomOptions& options);

}  // namespace star::agent
