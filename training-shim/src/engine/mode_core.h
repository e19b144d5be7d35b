// Internal: the synchronization modes of an all-reduce job (ssgd, fixed_k, groups) and
// the switches between them, on a flat "state" buffer (the parameters, and for a
// framework's model also its float buffers) and a flat gradient. Who applies the update
// is the caller's business: SyncEngine applies its own SGD; GradientEngine hands the
// averaged gradient to a framework whose optimizer applies it.
//
// One iteration is three phases, in this order on every worker:
//   ApplyDue(state)          a decision due at iteration(): finish the old mode, check
//                            the workers agree, reconcile the state, set the new mode up
//   Exchange(grad, batch)    the gradient sum and batch over the mode's group (a fixed-k
//                            parent adds its children's arrivals; a child sends to its
//                            parent); the result is in sum() = [gradient sum, batch, n]
//   ... the caller updates the state from sum() (not a child) ...
//   Publish(state)           a fixed-k parent sends the updated state to the children
//                            that contributed; a child receives its parent's state (and
//                            switches with it when the parent switched)
// SyncEngine runs all three inside Step; GradientEngine runs Publish and ApplyDue when
// the next iteration begins (the framework's optimizer step lies in between).
//
// Fixed-k state messages carry a flag: 0 = a round's state, 1 = switch now, 2 = the
// parent finished (Finish); every gradient a child sends is answered by exactly one.
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
#include "star/shim/sync_engine.h"
#include "engine/merge_signals.h"

namespace star::shim::internal {

// |sum[0, g) / sum[g]|^2: the squared norm of the averaged gradient in an Exchange's
// sum(), in float lanes per block (vectorizes), blocks summed in double.
double MeanSquaredNorm(const std::vector<float>& sum, size_t g);

class ModeCore {
 public:
  // `state_size` >= `grad_size` >= 1 floats. Takes ownership of `world`; splits its
  // point-to-point communicator (collective: every rank calls it).
  static StatusOr<std::unique_ptr<ModeCore>> Create(std::unique_ptr<Collective> world,
                                                    size_t state_size, size_t grad_size,
                                                    EngineOptions options);
  ~ModeCore();
  ModeCore(const ModeCore&) = delete;
  ModeCore& operator=(const ModeCore&) = delete;

  // SyncEngine::Schedule's contract.
  Status Schedule(const api::Decision& decision);

  // Broadcasts rank 0's state (at creation).
  Status BroadcastState(std::span<float> state);

  // Applies the decision due at iteration(), if any (not on a fixed-k child: its parent
  // tells it when). A decision with the synchronisation in force
  // (api::SameSynchronization: it changes batches or AMP only) is taken up without a
  // switch: no check, no reconciling, no wait for peers. `switched` is set when a
  // decision was switched to (the caller resets its optimizer's state).
  Status ApplyDue(std::span<float> state, StepStats& stats, bool* switched);
  // Sums grad x grad_scale and batch over the mode's group into sum(); advances
  // iteration() unless this worker is a fixed-k child (it only sends).
  Status Exchange(std::span<const float> grad, float grad_scale, int64_t batch,
                  StepStats& stats);
  // The same sum one part of the gradient at a time, in place (ssgd and groups only:
  // PartsSupported): every worker passes parts of the same sizes in the same order. The
  // first part of an iteration also sums [batch, 1] (the arrival barrier runs before it)
  // and its totals are in part_totals(); `part` becomes its sum over the group; the last
  // part advances iteration().
  Status ExchangePart(std::span<float> part, float grad_scale, int64_t batch, bool first,
                      bool last, StepStats& stats);
  bool PartsSupported() const { return in_force_.mode != api::SyncMode::kFixedK; }
  // [batch, gradients summed] over the group after an iteration's first part.
  const std::vector<float>& part_totals() const { return totals_; }
  // See the header comment. A child that has no gradient awaiting an answer does
  // nothing. `switched` as in ApplyDue.
  Status Publish(std::span<float> state, StepStats& stats, bool* switched);
  // This worker is done. A fixed-k parent waits (bounded by the timeout) for each
  // child's last gradient and answers it with "finished"; a child waits for the answer
  // to its last gradient. Others: nothing. Later Exchanges only sum locally.
  Status Finish(std::span<float> state);

  // Whether the next Publish + ApplyDue read or write the state (a parent answers its
  // children, a child awaits its parent, a decision is due, or the group merges now
  // because another reached the exit from groups): when false the caller
  // may skip gathering the state.
  bool StateNeeded() const;

  // [gradient sum (grad_size), batch, gradients summed] after Exchange.
  const std::vector<float>& sum() const { return buf_; }
  int64_t iteration() const { return iteration_; }
  api::SyncMode mode() const { return in_force_.mode; }
  int rank() const { return world_->rank(); }
  int size() const { return world_->size(); }
  bool is_child() const { return parent_ >= 0; }
  // Errors are sticky: once a phase fails every later one fails with
  // FailedPrecondition naming the first error.
  Status CheckUsable() const;
  void Fail(const Status& s) {
    if (failed_.ok()) failed_ = s;
  }

 private:
  struct ChildInbox;
  ModeCore(std::unique_ptr<Collective> world, std::unique_ptr<Collective> p2p,
           std::unique_ptr<Collective> signal, size_t state_size, size_t grad_size,
           EngineOptions options);

  Status ApplyDecision(const api::Decision* d, std::span<float> state, StepStats& stats);
  // Waits for one gradient from every child (kept as the carry) and answers each with
  // the state and `flag`; stops the receiver.
  Status AnswerChildrenLast(std::span<const float> state, float flag, StepStats& stats);
  Status ReceiveFromParent(std::span<float> state, StepStats& stats, bool* switched);
  // Fixed-k child: forgets the decisions scheduled before iteration_ (the parent skipped
  // them: batches or AMP only); FailedPrecondition if one would have switched.
  Status DropPassed();
  Status CheckConsistent(const api::Decision* d);
  Status Reconcile(api::SyncMode old_mode, std::span<float> state);
  Status SetUp(const api::Decision& d);
  // Groups: the iteration of the first pending decision that leaves the groups in force.
  std::optional<int64_t> PendingExit() const;
  // Groups: a leader starts listening for other groups' merges once an exit is pending.
  void ListenForMerges();
  // Groups: every group merges at its own iteration boundary (see merge_signals.h) into
  // the exit decision at `at`, iteration() becoming `at`.
  Status MergeGroups(int64_t at, std::span<float> state, StepStats& stats);
  // Groups: the [merge heard, exit known] trailer of this worker's all-reduce, and what the
  // group's sum of it says.
  void FillMergeTrailer(float* trailer) const;
  void ReadMergeTrailer(const float* trailer);
  void StopInbox();
  std::vector<float> StateMessage(std::span<const float> state, float flag) const;

  std::unique_ptr<Collective> world_;
  std::unique_ptr<Collective> p2p_;    // child -> parent gradients only
  std::unique_ptr<Collective> signal_;  // groups leaders' merge messages only
  std::unique_ptr<Collective> local_;  // ring (fixed_k) or own group (groups); null if alone
  std::vector<int> local_members_;     // local_'s world ranks, ascending
  size_t state_size_ = 0;
  size_t grad_size_ = 0;
  EngineOptions options_;
  std::vector<float> buf_;    // [gradient sum, batch, gradients summed]
  std::vector<float> carry_;  // child gradients taken at a switch
  std::vector<float> first_;  // ExchangePart's first part with its [batch, 1] trailer
  std::vector<float> totals_{0.0f, 0.0f};  // [batch, gradients summed] of the first part
  int64_t iteration_ = 0;
  int64_t switches_ = 0;
  api::Decision in_force_;     // the last decision switched to (ssgd at the start)
  int parent_ = -1;            // fixed_k child: parent's world rank
  bool awaiting_parent_ = false;  // fixed_k child: a sent gradient is not answered yet
  bool parent_finished_ = false;  // fixed_k child: the parent finished
  bool finished_ = false;
  std::vector<int> children_;  // fixed_k parent: world ranks
  std::vector<int> contributors_;  // fixed_k parent: child indices of the last round
  std::unique_ptr<ChildInbox> inbox_;
  std::unique_ptr<MergeSignals> merges_;  // groups leader, an exit pending: listening
  std::vector<int> other_leaders_;        // groups leader: the other groups' leaders
  bool merge_now_ = false;                // groups: the group agreed to merge at the next boundary
  std::map<int64_t, api::Decision> pending_;  // by apply_at_iteration
  Status failed_;
};

}  // namespace star::shim::internal
