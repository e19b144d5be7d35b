// Synchronizer: one worker's gradient exchange, whatever the job's architecture: the
// all-reduce SyncEngine (ssgd, fixed_k, groups; sync_engine.h) or a parameter-server
// worker (ssgd, fixed_k, asgd; parameter_server.h). A trainer hands it this worker's
// gradient, summed over its local batch, as a flat float32 buffer; the exchange weights
// every worker's gradient by its batch (the update is sum(gradients) / sum(batches)) and
// the synchronizer's params() are the parameters to train on next.
//
// Decisions: Schedule each decision as soon as it arrives (WorkerSession's
// IterationPlan::received); it takes effect on every worker at its apply_at_iteration.
// What happens to the parameters at a switch is the engine's (sync_engine.h: reconciled
// over all workers, momentum reset; parameter_server.h: servers keep their state), so
// every worker trains on consistent parameters after it. A decision that changes only
// batches or AMP is no switch (api::SameSynchronization): the engine passes it alone.
//
// Thread-compatibility: not thread-safe; call every method from one thread. LibTorch-free
// (spans and plain structs), so it binds to Python as it is. Errors are sticky: after a
// Step fails (a peer is gone or late: Unavailable / DeadlineExceeded; workers disagree
// on a decision: Aborted) every later Step fails with FailedPrecondition.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "star/core/api/decision.h"
#include "star/core/api/types.h"
#include "star/core/status.h"
#include "star/shim/collective.h"
#include "star/shim/sync_engine.h"
#include "star/shim/worker_config.h"

namespace star::shim {

struct SynchronizerOptions {
  // 0 = all-reduce (SyncEngine); P > 0 = parameter-server job whose ranks [0, P) serve
  // and this rank is a worker. >= 0. Default 0.
  int parameter_servers = 0;
  // All-reduce: the optimizer step the engine applies. Parameter-server jobs: unused here
  // (the servers apply theirs). Default: SgdOptions's defaults.
  SgdOptions optimizer;
  // Parameter-server jobs: the model's tensor sizes in order (servers shard by tensor);
  // their sum must equal the parameter count. Default empty = one tensor of them all.
  std::vector<size_t> tensor_sizes;
  // Bound on engine waits (EngineOptions / PsOptions::timeout). > 0. Default 60 s.
  std::chrono::milliseconds timeout{60000};
  // All-reduce: split waiting on peers from communication (EngineOptions). Default true.
  bool measure_wait = true;
};

class Synchronizer {
 public:
  // Collective over `world` (every worker, and every server of a parameter-server job,
  // creates its side at once). All-reduce: every worker starts from rank 0's
  // initial_params. Parameter-server jobs: from the servers' parameters (initial_params
  // only gives the size). Errors: InvalidArgument naming the field (empty
  // initial_params, tensor_sizes not summing to its size, options), or the engine's.
  static StatusOr<std::unique_ptr<Synchronizer>> Create(std::unique_ptr<Collective> world,
                                                        std::span<const float> initial_params,
                                                        SynchronizerOptions options);
  // ConnectWorld(config) then Create with config's parameter_servers and timeout; keeps
  // the store server, if this process hosts it, until destroyed. InvalidArgument when
  // this rank is a parameter server.
  static StatusOr<std::unique_ptr<Synchronizer>> Connect(const WorkerConfig& config,
                                                         std::span<const float> initial_params,
                                                         SynchronizerOptions options);
  virtual ~Synchronizer() = default;

  // Exchanges this worker's gradient for one iteration (every worker calls it):
  // grad_sum is summed over local_batch (>= 1) samples, size params().size(). Applies a
  // decision due at iteration() first. Errors: InvalidArgument (sizes, batch), the
  // exchange's errors above, FailedPrecondition after Finish.
  virtual StatusOr<StepStats> Step(std::span<const float> grad_sum, int64_t local_batch) = 0;
  // Holds `decision` for its apply_at_iteration. Errors: InvalidArgument (invalid for
  // this job, e.g. k > workers), FailedPrecondition (its iteration already passed),
  // Unimplemented (asgd in an all-reduce job, groups in a parameter-server job).
  virtual Status Schedule(const api::Decision& decision) = 0;
  // This worker is done: parameter servers stop once every worker finished; all-reduce:
  // fixed-k messages still in flight are answered or awaited (SyncEngine::Finish), so no
  // peer hangs on a worker that exited. Later Steps fail.
  virtual Status Finish() = 0;

  virtual std::span<const float> params() const = 0;
  virtual int64_t iteration() const = 0;  // iterations run; a fixed_k child may skip ahead
  virtual api::SyncMode mode() const = 0;  // the mode in force
};

}  // namespace star::shim
