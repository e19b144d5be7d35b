// Collective: one communicator over a fixed set of ranks, whatever moves the bytes
// (Gloo over TCP on CPU, NCCL on GPU, threads in tests).
//
// Every operation has the communicator's timeout: a dead or hung peer makes it fail with
// DeadlineExceeded or Unavailable naming the peer, never hang. A communicator is used by
// one thread at a time. Buffers are float32 (gradients and parameters).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::shim {

class Collective {
 public:
  virtual ~Collective() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: data becomes the element-wise sum over all ranks.
  [[nodiscard]] virtual Status AllReduceSum(float* data, size_t count) = 0;
  // In place: data becomes root's data on every rank.
  [[nodiscard]] virtual Status Broadcast(float* data, size_t count, int root) = 0;
  // Point to point. A Send completes once the data is handed to the transport; Recv waits
  // for a message with the same tag from `peer`.
  [[nodiscard]] virtual Status Send(const float* data, size_t count, int peer, uint32_t tag) = 0;
  [[nodiscard]] virtual Status Recv(float* data, size_t count, int peer, uint32_t tag) = 0;
  // Receives one message with `tag` from whichever of `peers` sends first; returns its rank.
  [[nodiscard]] virtual StatusOr<int> RecvFromAny(float* data, size_t count,
                                                  const std::vector<int>& peers, uint32_t tag) = 0;
  [[nodiscard]] virtual Status Barrier() = 0;

  // A communicator over `members` (ranks of this one, ascending, including this rank);
  // ranks are renumbered 0..members.size()-1 in that order. Every member must call it
  // with the same members and `name`; `name` keeps concurrent splits apart.
  [[nodiscard]] virtual StatusOr<std::unique_ptr<Collective>> Split(
      const std::vector<int>& members, const std::string& name) = 0;
};

}  // namespace star::shim
