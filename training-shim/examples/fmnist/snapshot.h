// Parameter snapshots: how worker 0 hands its parameters to the evaluator process.
// A snapshot file is "STARSNP1", int64 iteration, double time_seconds, int64 count,
// then count float32 parameters (host byte order: written and read on one machine).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::fmnist {

// Writes dir/snap-<iteration, 12 digits>.bin through a temporary name and a rename, so a
// reader never sees a partial file. Unavailable naming --snapshot-dir on failure.
[[nodiscard]] Status WriteSnapshot(const std::string& dir, int64_t iteration, double time_seconds,
                                   std::span<const float> params);

struct Snapshot {
  int64_t iteration = 0;
  double time_seconds = 0;
  std::vector<float> params;
};

// Reads a snapshot of `expected` parameters. InvalidArgument naming the path when the
// file is not such a snapshot or is truncated.
[[nodiscard]] StatusOr<Snapshot> ReadSnapshot(const std::string& path, size_t expected);

}  // namespace star::fmnist
