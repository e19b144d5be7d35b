// ConnectWorld: the job's communicator for one process, as its WorkerConfig describes it:
// Gloo over TCP through the rendezvous store (hosted here with config.host_store), with
// NCCL for all-reduces and broadcasts when config.backend is "nccl", or,
// for a lone worker with no store, a local communicator of one rank.
#pragma once

#include <memory>

#include "star/core/status.h"
#include "star/shim/collective.h"
#include "star/shim/store_server.h"
#include "star/shim/worker_config.h"

namespace star::shim {

struct World {
  // Serves the rendezvous store when config.host_store; null otherwise. Keep it alive as
  // long as any rank may still connect (in practice: as long as `collective`).
  std::unique_ptr<StoreServer> store_server;
  // Every rank of the job: parameter servers first, then workers. Rank = config.rank.
  std::unique_ptr<Collective> collective;
};

// Collective: every rank of the job calls it. Errors: InvalidArgument naming the field
// (Validate(config); "store_url" when it is required - world_size > 1 or
// parameter_servers > 0 - or, with host_store, not "http://HOST:PORT"); Unavailable (the
// store cannot be served); DeadlineExceeded (the peers do not all show up within
// config.timeout); for backend "nccl", InvalidArgument naming backend (built without CUDA,
// or no CUDA device) or Unavailable (NCCL cannot connect).
[[nodiscard]] StatusOr<World> ConnectWorld(const WorkerConfig& config);

}  // namespace star::shim
