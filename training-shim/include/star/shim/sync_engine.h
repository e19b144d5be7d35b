// SyncEngine: executes the job's synchronization mode (ALGORITHMS.md section 3) on flat
// float32 gradient and parameter buffers, one iteration per Step(), for the all-reduce
// architecture. It owns the parameters and applies the optimizer step, so every mode
// runs the same update code. Independent of LibTorch: an adapter copies the model's
// gradients into a flat buffer, calls Step(), and copies params() back.
//
// Modes (api::SyncMode):
//  - ssgd: the gradient sums and batch counts of all workers are all-reduced; the update
//    uses sum(gradients) / sum(batches), so n workers of batch B equal one of batch nB
//    and unequal batches give exactly the global-batch gradient.
//  - fixed_k ("ring of the fastest k plus children"). Convention: the ranks ordered as
//    the concatenation of decision.groups, then every rank not listed there in ascending
//    order (empty groups = 0, 1, ..., n-1), are the workers fastest first. The first k
//    of that order form the ring; the j-th remaining rank (j = 0, 1, ...) is a child of
//    ring member order[j mod k]. A child sends its gradient sum and batch to its parent
//    and waits for parameters. A parent, each round, adds the child gradients that have
//    arrived (a background thread receives them) to its own, all-reduces over the ring,
//    updates, and sends the new parameters to the children that contributed. A child
//    gradient arriving after the parent took its round's arrivals goes into the next
//    round: never dropped, never counted twice. The update is normalised by the samples
//    actually summed. A child's iteration() follows its parent's (it may advance by more
//    than one per Step).
//  - groups: decision.groups partition the ranks; each group all-reduces inside itself
//    and keeps its own copy of the parameters.
//  - asgd: not implemented in this engine (Schedule returns Unimplemented); nor is the
//    parameter-server architecture.
//
// Switching (a decision taking effect at apply_at_iteration): every worker, at that
// iteration, first finishes the old mode (a fixed-k parent waits for one gradient from
// each child, keeps those gradients as a carry added to its next contribution, and
// tells its children to switch), then all workers check through rank 0 that they apply
// the same decision (a mismatch, or a worker that runs something else, makes every
// worker fail with Aborted or DeadlineExceeded within about one communicator timeout,
// never hang), then parameters are reconciled (leaving groups: averaged over all
// workers; otherwise rank 0's are broadcast), momentum buffers are reset to zero, and
// the new mode's sub-communicators are created. A decision that keeps the
// synchronisation in force (api::SameSynchronization: only per-worker batches or AMP
// change, which the trainer applies at that iteration) is no switch: each worker passes
// its iteration alone, with no check, no reconciling and its momentum kept, so workers
// that drift apart (fixed_k, groups) do not wait for each other.
//
// Leaving groups (any switching decision while in groups) does not wait for every group
// to reach apply_at_iteration: the first group there tells the other groups' leaders,
// each group agrees on it through its next all-reduce, and merges at the boundary after
// it, its iteration() set to apply_at_iteration (decisions in between, batches or AMP
// only, are skipped). The fast group waits about one of the slowest group's iterations.
// Limit: the first group must reach the decision within one communicator timeout of a
// leader learning of it (a leader listens from then on).
//
// Errors are sticky: once a Step fails, the engine is unusable and every later Step
// returns FailedPrecondition naming the first error (like an aborted NCCL communicator).
// A Schedule error means this worker cannot follow the job's decisions; the caller
// should stop (its peers then fail within a timeout rather than hang).
//
// Batch counts travel inside the float32 buffers: sums of batches stay exact up to 2^24
// samples per update.
//
// Limits: a fixed_k child that computes for longer than the communicator timeout fails
// the job (its parent's receive times out). To end a run that is in fixed_k, schedule
// ssgd first: destroying an engine makes its peers' pending operations fail with
// Unavailable or DeadlineExceeded.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "star/core/api/decision.h"
#include "star/core/api/types.h"
#include "star/core/status.h"
#include "star/shim/collective.h"

namespace star::shim {

namespace internal {
class ModeCore;
}  // namespace internal

// Plain SGD: v = momentum * v + (g + weight_decay * p); p -= lr * v (v = g without
// momentum), where g = summed gradient / summed batch.
struct SgdOptions {
  float lr = 0.01f;           // learning rate, > 0. Default 0.01.
  float momentum = 0.0f;      // in [0, 1). Default 0 (no momentum buffer).
  float weight_decay = 0.0f;  // >= 0. Default 0.
};

struct EngineOptions {
  // Upper bound on engine-level waits that are not a single collective operation (a
  // fixed-k parent waiting for its children's last gradients at a switch). Collective
  // operations use their communicator's own timeout. Default 30 s, > 0.
  std::chrono::milliseconds timeout{30000};
  // Runs a barrier before each all-reduce so StepStats separates waiting on slower peers
  // (wait_seconds) from the all-reduce itself (communication_seconds); the straggler
  // detector needs that split. Costs one small collective per iteration. Default true.
  bool measure_wait = true;
};

// What one Step did, for timing reports and the noise-scale estimate.
struct StepStats {
  int64_t iteration = 0;             // iteration() after the step
  double communication_seconds = 0;  // in all-reduces / sends (ring, group, world)
  double wait_seconds = 0;           // arrival barrier; child: waiting for the parent's parameters
  double switch_seconds = 0;         // applying a decision (check, reconcile, setup)
  bool updated = false;              // this worker computed an update (false for children)
  int64_t update_batch = 0;          // samples summed into the update, when updated
  int contributions = 0;             // gradients summed into the update, when updated
  double update_grad_sq_norm = 0;    // |summed gradient / update_batch|^2, when updated
  // The link into this worker from its ring predecessor in the step's all-reduces (peer:
  // a world rank); absent when the collective does not time links (Collective::TakeLinkSample).
  std::optional<LinkSample> link;
};

class SyncEngine {
 public:
  // Collective over all workers: every rank calls Create with the same sizes. Takes
  // ownership of `world`; broadcasts rank 0's initial_params so every worker starts
  // equal. Starts in ssgd at iteration 0.
  // Errors: InvalidArgument (empty params, bad options), or the collective's error.
  static StatusOr<std::unique_ptr<SyncEngine>> Create(std::unique_ptr<Collective> world,
                                                      std::vector<float> initial_params,
                                                      SgdOptions optimizer,
                                                      EngineOptions options = {});
  // Stops the fixed-k receiver thread, if any; may wait up to one communicator timeout
  // if a peer is stuck.
  ~SyncEngine();
  SyncEngine(const SyncEngine&) = delete;
  SyncEngine& operator=(const SyncEngine&) = delete;

  // Runs one iteration (collective: every worker calls it). local_grad_sum is this
  // worker's gradient SUMMED over its local batch (size params().size()); local_batch
  // >= 1 is that batch's sample count. Applies any decision due at iteration() first.
  // Errors: InvalidArgument (sizes), Aborted (workers disagree on a decision),
  // DeadlineExceeded / Unavailable (a peer is late or gone), FailedPrecondition (an
  // earlier Step failed). Not thread-safe: call from one thread, like Schedule().
  StatusOr<StepStats> Step(std::span<const float> local_grad_sum, int64_t local_batch);

  // Schedules `decision` to take effect at decision.apply_at_iteration on every worker;
  // every worker must be given the same decision before that iteration. Errors:
  // InvalidArgument (fails api::Validate, ranks out of range, groups mode without a
  // partition of all ranks, fixed_k with k > n, a different decision with the same
  // apply_at_iteration and epoch), FailedPrecondition (apply_at_iteration already
  // passed on this worker: a late decision), Unimplemented (asgd). A decision with a
  // newer epoch replaces one pending at the same iteration; re-delivering the same one
  // is a no-op.
  Status Schedule(const api::Decision& decision);

  // This worker is done (call once, after its last Step): a fixed-k parent waits (up to
  // options.timeout) for each child's last gradient and answers it "finished"; a child
  // waits for the answer to its last gradient and takes its parent's parameters. So no
  // peer is left waiting on a worker that exited. Other modes: nothing. Idempotent;
  // later Steps only use this worker's own gradient. Errors: the exchange's errors.
  Status Finish();

  std::span<const float> params() const { return params_; }
  int64_t iteration() const;
  api::SyncMode mode() const;
  int rank() const;
  int size() const;
  // fixed_k: whether this worker is a child (not in the ring). False in other modes.
  bool is_child() const;

 private:
  SyncEngine(std::unique_ptr<internal::ModeCore> core, std::vector<float> params,
             SgdOptions optimizer);

  StatusOr<StepStats> StepImpl(std::span<const float> grad, int64_t batch);
  // Applies sum = [gradient sum (P), batch, gradients summed] as one update.
  void Update(const std::vector<float>& sum, StepStats& stats);

  std::unique_ptr<internal::ModeCore> core_;  // the modes and switches (engine/mode_core.h)
  std::vector<float> params_;
  std::vector<float> velocity_;
  SgdOptions optimizer_;
};

}  // namespace star::shim
