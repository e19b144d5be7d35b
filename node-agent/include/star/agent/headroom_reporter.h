// HeadroomReporter: the agent loop's part that samples the node (HostCounters) and writes
// its headroom into the NodeAllocation's status (K8sSource::ReportHeadroom), as often as
// HeadroomOptions allow. One per agent, on the loop's thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "star/agent/headroom.h"
#include "star/agent/host_counters.h"
#include "star/agent/k8s_source.h"
#include "star/core/api/node_headroom.h"
#include "star/core/status.h"

namespace star::agent {

struct HeadroomConfig {
  HostPaths paths;
  std::string interface;  // "" = CPU only
  // The NIC's capacity; 0 = its link speed (LinkSpeedBitsPerSecond), or unknown.
  double nic_capacity_bits_per_second = 0;
  HeadroomOptions options;
};

class HeadroomReporter {
 public:
  explicit HeadroomReporter(HeadroomConfig config);

  // Once `options.interval` has passed since the last reading (at once, the first time),
  // reads the counters, makes a sample of the two readings and writes it when
  // ShouldWriteHeadroom says so.
  // Returns the error of a failed read or write (the next call tries again).
  [[nodiscard]] Status Tick(K8sSource& source);

  // The newest sample (nullopt before the first whole interval).
  const std::optional<api::NodeHeadroom>& sample() const { return sample_; }

 private:
  HeadroomConfig config_;
  std::optional<HostCounters> base_;  // the reading the next sample starts from
  std::optional<api::NodeHeadroom> sample_;
  std::optional<api::NodeHeadroom> written_;
  std::chrono::steady_clock::time_point written_at_;
};

}  // namespace star::agent
