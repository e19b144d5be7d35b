// NcclCollective: the GPU Collective backend (NCCL), compiled when STAR_WITH_CUDA is set.
//
// Unlike the other backends, every data pointer passed to an NcclCollective is a CUDA
// DEVICE pointer (on the device current when ConnectNccl was called). Operations are
// enqueued on the communicator's own stream and waited for, so on return the data is
// final. A peer that hangs or dies is detected by polling ncclCommGetAsyncError until the
// timeout; the communicator is then aborted (ncclCommAbort) and every later call fails
// with Aborted.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "star/core/status.h"
#include "star/shim/collective.h"
#include "star/shim/staged_collective.h"
#include "star/shim/store.h"

namespace star::shim {

struct NcclOptions {
  // Prefix of the store keys used to exchange the NCCL unique id.
  std::string prefix = "star-nccl";
  // Bound on connecting and on every operation.
  std::chrono::milliseconds timeout{30000};
};

// Publishes (rank 0) or fetches (others) an ncclUniqueId through `store` at
// "<prefix>/unique_id" and returns it as bytes. Exposed for tests; needs no GPU.
[[nodiscard]] StatusOr<Bytes> ExchangeNcclUniqueId(Store& store, int rank,
                                                   const NcclOptions& options);

// Creates rank `rank` of `size` on the current CUDA device (non-blocking communicator).
// Unimplemented when built without STAR_WITH_CUDA; Unavailable without a CUDA device.
[[nodiscard]] StatusOr<std::unique_ptr<Collective>> ConnectNccl(std::shared_ptr<Store> store,
                                                                int rank, int size,
                                                                const NcclOptions& options);

// Staging in the current CUDA device's memory (cudaMalloc, synchronous cudaMemcpy), for a
// StagedCollective over ConnectNccl's communicator. Unimplemented when built without
// STAR_WITH_CUDA; Unavailable without a CUDA device.
[[nodiscard]] StatusOr<std::unique_ptr<DeviceStaging>> NewCudaStaging();

}  // namespace star::shim
