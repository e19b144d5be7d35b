// GlooCollective: the CPU Collective backend, Gloo over TCP, rendezvous through a Store.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "star/core/status.h"
#include "star/shim/collective.h"
#include "star/shim/store.h"

namespace star::shim {

struct GlooOptions {
  // The address this rank listens on for its peers: loopback or a veth address.
  std::string hostname = "127.0.0.1";
  // Prefix of every store key this communicator uses, so several jobs (and splits) can
  // share one store. Ranks of one communicator must use the same prefix.
  std::string prefix = "star";
  // Bound on connecting and on every operation.
  std::chrono::milliseconds timeout{30000};
};

// Connects rank `rank` of `size` (every rank calls this with the same store, size and
// prefix). Fails with DeadlineExceeded if the peers do not all show up within the timeout.
//
// Semantics beyond Collective's: a Send waits until the receiver has posted the matching
// Recv and the data is written (like MPI_Ssend), up to the timeout. After any failed
// operation the communicator is broken (Gloo closes every connection of a context on a
// timeout or I/O error): later calls fail with Aborted; build a new one. Splits share the
// parent's TCP device and store; they stay usable after the parent is destroyed.
// AllReduceSum is a ring (reduce-scatter, all-gather) whose hops are timed: TakeLinkSample
// gives the link from this rank's ring predecessor (gloo_ring.h).
// Zero-length AllReduceSum/Broadcast/Send/Recv return OK without communicating (every
// rank passes the same count); RecvFromAny of 0 floats is InvalidArgument.
// The first call sets SIGPIPE to ignored for the process: Gloo writes to peer sockets
// without MSG_NOSIGNAL, and a dead peer must be an error, not the end of this process.
[[nodiscard]] StatusOr<std::unique_ptr<Collective>> ConnectGloo(std::shared_ptr<Store> store,
                                                                int rank, int size,
                                                                const GlooOptions& options);

}  // namespace star::shim
