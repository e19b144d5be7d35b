// Per-iteration timings of one star-fmnist worker: the --timing-csv file and the compute
// figures of its final JSON line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::fmnist {

struct IterationTiming {
  double compute = 0;   // seconds: forward, backward, copy into the flat buffer
  double exchange = 0;  // seconds: the synchronizer's step
  int64_t batch = 0;
  bool amp = false;
};

// Writes "iteration,compute_seconds,exchange_seconds,batch,amp" and one row per
// iteration. Unavailable naming --timing-csv when the file cannot be written.
[[nodiscard]] Status WriteTimingCsv(const std::string& path, const std::vector<IterationTiming>& t);

struct ComputeSummary {
  double mean_ms = 0;    // 0 when nothing was counted
  double median_ms = 0;
};

// Mean and median compute time, skipping the first min(10, n/2) iterations (allocator
// and kernel warm-up); the median resists other processes sharing the CPU.
ComputeSummary SummarizeCompute(const std::vector<IterationTiming>& t);

}  // namespace star::fmnist
