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
#include <optional>
#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::shim {

// The link into a rank from its ring predecessor `peer`, as its ring all-reduces timed it:
// the fastest hop's receive (`seconds` for `bytes`), summed over the all-reduces it covers.
struct LinkSample {
  int peer = -1;  // rank in the communicator that measured it
  double seconds = 0;
  int64_t bytes = 0;
};

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

  // The link sample of the AllReduceSum calls since the last call, then starts afresh;
  // nullopt when none ran or the backend does not time its links (only Gloo does).
  virtual std::optional<LinkSample> TakeLinkSample() { return std::nullopt; }

  // A communicator over `members` (ranks of this one, ascending, including this rank);
  // ranks are renumbered 0..members.size()-1 in that order. Every member must call it
  // with the same members and `name`; `name` keeps concurrent splits apart.
  [[nodiscard]] virtual StatusOr<std::unique_ptr<Collective>> Split(
      const std::vector<int>& members, const std::string& name) = 0;
};

}  // namespace star::shim
