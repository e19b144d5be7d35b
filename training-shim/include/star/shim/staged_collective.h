// StagedCollective: a Collective over host buffers whose bulk collectives run on a device
// communicator (NCCL), for engines whose arithmetic runs on the host (GradientEngine, and
// through it the star.torch hook). AllReduceSum and Broadcast copy the data into a device
// buffer, run there and copy the result back; point-to-point messages, RecvFromAny and
// Barrier stay on the host communicator (Gloo), since NCCL cannot receive from any source,
// which fixed-k's parents need.
//
// Both communicators span the same ranks in the same order. Errors are the communicators'
// or the staging's; like every Collective, one thread at a time.
#pragma once

#include <cstddef>
#include <memory>

#include "star/core/status.h"
#include "star/shim/collective.h"

namespace star::shim {

// Device memory for staging: one buffer, grown on demand, and the copies to and from it.
class DeviceStaging {
 public:
  virtual ~DeviceStaging() = default;
  // A device buffer of at least `count` floats, owned by this object; valid until the next
  // Reserve.
  [[nodiscard]] virtual StatusOr<float*> Reserve(size_t count) = 0;
  [[nodiscard]] virtual Status ToDevice(float* device, const float* host, size_t count) = 0;
  [[nodiscard]] virtual Status ToHost(float* host, const float* device, size_t count) = 0;
};

// Host memory standing in for a device (tests, and a device communicator that takes host
// pointers).
std::unique_ptr<DeviceStaging> NewHostStaging();

// Joins `host` and `device` (same rank and size, else InvalidArgument). Split splits both
// and shares the staging.
[[nodiscard]] StatusOr<std::unique_ptr<Collective>> NewStagedCollective(
    std::unique_ptr<Collective> host, std::unique_ptr<Collective> device,
    std::shared_ptr<DeviceStaging> staging);

}  // namespace star::shim
