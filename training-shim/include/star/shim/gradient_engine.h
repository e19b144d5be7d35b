// GradientEngine: the all-reduce sync engine (sync_engine.h's modes, switches and
// guarantees) for a trainer whose own optimizer applies the update, such as a PyTorch
// DistributedDataParallel communication hook (star.torch). The engine averages
// gradients; the framework steps its optimizer; the engine keeps the model's state
// consistent across mode switches.
//
// State: the model's parameters followed by any float buffers (BatchNorm statistics),
// flattened, size S; the gradient covers the trainable parameters, size G <= S. Each
// iteration, on every worker:
//   BeginIteration(state)       before the forward pass, with the model's current state.
//                               A fixed-k parent sends it to the children whose gradients
//                               it summed last round; a child receives its parent's state
//                               into `state` (copy it into the model); a decision due now
//                               is applied: the state is reconciled over all workers
//                               (averaged when leaving groups, else rank 0's) and
//                               `switched` tells the caller to reset its optimizer's state
//                               (momentum, Adam moments), as SyncEngine resets its own.
//   Exchange(grad, batch, out)  after backward: `grad` is this worker's gradient of the
//                               MEAN loss over `batch` samples; `out` receives the
//                               batch-weighted mean over the mode's group, sum(batch_i x
//                               grad_i) / sum(batch_i): with equal batches exactly what
//                               DistributedDataParallel's all-reduce gives. A fixed-k child
//                               only sends (out = its own gradient; its parent's state
//                               replaces whatever its optimizer does with it).
//   or, to overlap the exchange with backward (ssgd and groups: parts_supported()),
//   ExchangePart(part, batch, last) once per part of the gradient as backward produces it
//                               (a DDP bucket), in place, in the same order and sizes on
//                               every worker, the parts covering the G floats; each part
//                               is averaged as Exchange averages the whole (the first
//                               part carries the batch total, its call runs the arrival
//                               barrier); the last one ends the iteration.
//   ... the framework's optimizer step ...
//   Finish(state)               once, when the worker stops: answers or awaits the
//                               fixed-k messages still in flight, so no peer hangs.
//
// Thread-compatibility: not thread-safe; one thread calls every method. Errors are sticky
// as SyncEngine's (a dead peer: Unavailable / DeadlineExceeded within the communicator's
// timeout; a disagreement on a decision: Aborted; then FailedPrecondition).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "star/core/api/decision.h"
#include "star/core/api/types.h"
#include "star/core/status.h"
#include "star/shim/collective.h"
#include "star/shim/sync_engine.h"

namespace star::shim {

namespace internal {
class ModeCore;
}  // namespace internal

// What BeginIteration did.
struct BeginStats {
  int64_t iteration = 0;             // iteration() after it
  bool switched = false;             // a switch took effect: reset the optimizer's state
  double wait_seconds = 0;           // a child waiting for its parent's state
  double communication_seconds = 0;  // a parent sending its state
  double switch_seconds = 0;         // applying a decision
};

class GradientEngine {
 public:
  // Collective over all workers (every rank calls it with the same sizes). Broadcasts
  // rank 0's `state` into every worker's `state` (copy it into the model). Starts in
  // ssgd at iteration 0. Errors: InvalidArgument (empty state, grad_size 0 or > state
  // size, options), or the collective's error.
  static StatusOr<std::unique_ptr<GradientEngine>> Create(std::unique_ptr<Collective> world,
                                                          std::span<float> state,
                                                          size_t grad_size,
                                                          EngineOptions options = {});
  ~GradientEngine();
  GradientEngine(const GradientEngine&) = delete;
  GradientEngine& operator=(const GradientEngine&) = delete;

  // See the header comment. InvalidArgument for a state of the wrong size.
  StatusOr<BeginStats> BeginIteration(std::span<float> state);
  // See the header comment. grad and out have G floats (out may alias grad); batch >= 1.
  // StepStats::update_grad_sq_norm is |out|^2 when updated.
  StatusOr<StepStats> Exchange(std::span<const float> grad, int64_t batch, std::span<float> out);
  // See the header comment: `part` becomes its batch-weighted mean over the mode's group.
  // `batch` is the iteration's (the first part's counts). Returns the iteration's stats
  // so far; complete (updated, update_batch, contributions, |mean gradient|^2) at the
  // last part. FailedPrecondition in fixed_k (exchange the whole gradient there);
  // InvalidArgument for an empty part, batch < 1, or parts that do not add up to G.
  StatusOr<StepStats> ExchangePart(std::span<float> part, int64_t batch, bool last);
  // Whether the mode in force takes the gradient in parts (ssgd, groups; not fixed_k).
  // Constant between BeginIteration and the end of the iteration's exchange.
  bool parts_supported() const;
  // SyncEngine::Schedule's contract.
  Status Schedule(const api::Decision& decision);
  // See the header comment. Idempotent.
  Status Finish(std::span<float> state);

  // Whether the next BeginIteration reads or writes the state (a fixed-k parent or child
  // exchanges it, or a decision is due); when false, any buffer of the right size will
  // do and it is left unchanged: the caller may skip gathering the model's state.
  bool state_needed() const;

  int64_t iteration() const;
  api::SyncMode mode() const;
  int rank() const;
  int size() const;
  bool is_child() const;
  size_t state_size() const { return state_size_; }
  size_t grad_size() const { return grad_size_; }

 private:
  GradientEngine(std::unique_ptr<internal::ModeCore> core, size_t state_size, size_t grad_size);
  Status CheckState(std::span<const float> state) const;

  std::unique_ptr<internal::ModeCore> core_;
  size_t state_size_;
  size_t grad_size_;
  // ExchangePart's iteration so far: floats exchanged (0: none yet), batch, stats.
  size_t part_offset_ = 0;
  int64_t part_batch_ = 0;
  StepStats part_stats_;
};

}  // namespace star::shim
