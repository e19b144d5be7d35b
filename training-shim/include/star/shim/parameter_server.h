// Parameter-server architecture (ALGORITHMS.md sections 3 and 4): P server processes hold
// the parameters and the optimizer state, sharded largest-first across them
// (star/shim/sharding.h); W workers send gradients and receive parameters.
//
// Ranks: one Collective "world" of size P + W. Ranks [0, P) are servers (server s is
// rank s), ranks [P, P + W) are workers (worker w is rank P + w). Every rank knows P and
// the tensor sizes, so all compute the same ShardPlan.
//
// Modes (the server's rule for when an update fires; every update is
// sum(gradients) / sum(batches) followed by the SgdOptions step of sync_engine.h, so
// gradients are averaged weighted by each worker's batch):
//  - ssgd: waits for one gradient from every worker, then updates and replies to all.
//    W workers of batch B equal one worker of batch W*B.
//  - fixed_k: an update fires as soon as k gradients of the current round (computed on
//    the server's current parameter version) are in. Gradients that arrive after their
//    round's update fired ("late") are not dropped: they are added to the next update.
//    The update is normalised by the samples actually summed. A worker receives the
//    parameters of the update that consumed its gradient.
//  - asgd: every gradient is applied alone on arrival (normalised by its own batch) and
//    the new parameters are replied at once. The optimizer's momentum is lowered by
//    1 - 1/n for n workers (asynchrony adds that much implicit momentum), floored at 0.
//  - groups: not supported by the parameter-server architecture (Unimplemented).
// Whatever the mode, an update also fires when no further gradient can arrive before it
// (every worker still running has a gradient waiting on this server), so a server never
// waits for a gradient that cannot come (workers that finished, fixed_k with k larger
// than the workers left, the last gradients before a switch).
// Servers update their shards independently: in fixed_k and asgd the parameters a worker
// holds may come from different update counts of different servers.
//
// Switching: PsWorker::Schedule(decision); every worker applies it to the Step whose
// iteration() equals decision.apply_at_iteration. A worker's gradient header carries the
// decision in force (its epoch, mode, k and first iteration). A server keeps applying
// the old mode to old-mode gradients, holds new-mode gradients unanswered, flushes the
// old mode's last gradients (so none is lost or applied twice) and switches once every
// running worker has sent its first new-mode gradient. A worker that sends an old-mode
// gradient at or past the switch iteration, or a different decision than another
// worker, makes the server fail with Aborted; it tells the workers waiting on it, and
// the others fail when their next operation with that server fails or times out.
// Momentum buffers are kept across switches (the server's state is continuous). A
// decision with the synchronisation in force (api::SameSynchronization: batches or AMP
// only) is no switch: the worker's header keeps the decision it runs, and no server
// waits for it.
//
// Wire format (float32 messages; integers travel in 20-bit halves, so they are exact
// below 2^40; batches must be < 2^24):
//  - worker -> server s, tag 0x50530001: header [kind (0 gradient, 1 done), batch,
//    iteration (2), parameter version the gradient was computed on (2), decision epoch
//    + 1 (2; 0 = the initial ssgd), mode, k, first iteration of that decision (2)] then
//    the gradient of server s's shard (ShardPlan::load[s] floats, its tensors in order).
//  - server -> worker, tag 0x50530002: [status code (0 = OK), version (2)] then the
//    shard's parameters, zero-padded to the largest shard (so a worker can receive the
//    servers' replies in any order with one RecvFromAny).
// A worker sends to servers 0..P-1 in order, then receives the P replies in whatever
// order they come; this cannot deadlock under rendezvous sends (Gloo, LocalCollective).
//
// Failures: every operation has the communicator's timeout. A server also fails with
// DeadlineExceeded when a worker it waits on stays silent longer than
// PsOptions::timeout (this catches a dead worker in asgd, where the others keep the
// server busy). A failed server sends an error reply to the workers waiting on it and
// returns; a worker that gets one fails with Aborted naming the server. Errors are
// sticky on both sides. Limits: a worker that computes for longer than the timeouts, or
// that reaches a switch more than a communicator timeout before the slowest worker,
// fails the job.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "star/core/api/decision.h"
#include "star/core/api/types.h"
#include "star/core/status.h"
#include "star/shim/collective.h"
#include "star/shim/sharding.h"
#include "star/shim/sync_engine.h"

namespace star::shim {

struct PsOptions {
  // A server fails with DeadlineExceeded when a worker it is waiting on has sent nothing
  // for this long. Checked whenever the server receives or times out. Default 30 s, > 0.
  std::chrono::milliseconds timeout{30000};
};

// What a server did (read after Run() returns, from the thread that ran it).
struct ServerStats {
  int64_t updates = 0;             // parameter updates applied (= version())
  int64_t gradients_applied = 0;   // gradients summed into updates
  int64_t samples_applied = 0;     // batches summed into updates
  int64_t late_gradients = 0;      // gradients applied in a later round than their own
  int64_t switches = 0;            // decisions switched to
  std::vector<int64_t> applied_by_worker;  // gradients applied, per worker index
};

// The mode a worker runs in: a decision (or the initial ssgd) and where it started.
struct PsRegime {
  int64_t tag = 0;  // decision epoch + 1; 0 = the initial ssgd
  api::SyncMode mode = api::SyncMode::kSsgd;
  int k = 0;            // fixed_k only; 0 otherwise
  int64_t start = 0;    // first iteration run under it
  friend bool operator==(const PsRegime&, const PsRegime&) = default;
};

class ParameterServer {
 public:
  // Collective over the whole world (every server and worker calls its Create with the
  // same num_servers and tensor_sizes). Takes ownership of `world`. initial_params is the
  // full flat model (size = sum of tensor_sizes); this server keeps its shard and
  // broadcasts it, so workers start from the servers' values.
  // Errors: InvalidArgument (sizes, options, this rank is not a server, no workers), or
  // the collective's error.
  static StatusOr<std::unique_ptr<ParameterServer>> Create(std::unique_ptr<Collective> world,
                                                           int num_servers,
                                                           const std::vector<size_t>& tensor_sizes,
                                                           std::span<const float> initial_params,
                                                           SgdOptions optimizer,
                                                           PsOptions options = {});
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;
  ~ParameterServer();

  // Serves until every worker has called Finish() (OK), or an error: DeadlineExceeded /
  // Unavailable (a worker is late or gone), Aborted (workers disagree on a decision),
  // FailedPrecondition (called again after an error). Blocks the calling thread.
  Status Run();

  int server_index() const;
  // This server's shard: its tensors in model order, concatenated.
  std::span<const float> shard() const { return shard_; }
  const ShardPlan& plan() const { return plan_; }
  int64_t version() const { return stats_.updates; }
  api::SyncMode mode() const { return regime_.mode; }
  const ServerStats& stats() const { return stats_; }

 private:
  struct Arrival;
  ParameterServer(std::unique_ptr<Collective> world, int num_servers, ShardPlan plan,
                  std::vector<float> shard, SgdOptions optimizer, PsOptions options);
  Status Serve();
  Status Receive(int worker, const std::vector<float>& msg);
  Status Advance();
  Status Fire(const std::vector<int>& workers);
  void Abort(const Status& error);
  std::string State() const;  // for error messages

  std::unique_ptr<Collective> world_;
  int num_servers_;
  int num_workers_;
  ShardPlan plan_;
  std::vector<float> shard_;
  std::vector<float> velocity_;
  SgdOptions optimizer_;
  PsOptions options_;
  PsRegime regime_;
  std::optional<PsRegime> announced_;  // the next regime, once a worker sent under it
  std::vector<std::unique_ptr<Arrival>> pending_;  // per worker: awaiting an update
  std::vector<std::unique_ptr<Arrival>> held_;     // per worker: under announced_
  std::vector<bool> done_;
  std::vector<int64_t> last_iteration_;  // per worker: last gradient's iteration, -1
  std::vector<std::chrono::steady_clock::time_point> idle_since_;
  ServerStats stats_;
  Status failed_;
};

class PsWorker {
 public:
  // Collective over the whole world (see ParameterServer::Create). Takes ownership of
  // `world`; receives the initial parameters from the servers. Starts in ssgd at
  // iteration 0. Errors: InvalidArgument (sizes, this rank is not a worker), or the
  // collective's error.
  static StatusOr<std::unique_ptr<PsWorker>> Create(std::unique_ptr<Collective> world,
                                                    int num_servers,
                                                    const std::vector<size_t>& tensor_sizes,
                                                    PsOptions options = {});
  PsWorker(const PsWorker&) = delete;
  PsWorker& operator=(const PsWorker&) = delete;
  ~PsWorker();

  // Sends local_grad_sum (this worker's gradient SUMMED over its batch, size params().
  // size()) with local_batch (in [1, 2^24)) to the servers and waits for the parameters
  // of the updates that consumed it; applies any decision due at iteration() first.
  // StepStats: iteration, communication_seconds (sending), wait_seconds (waiting for
  // the replies); updated is false (servers update). Errors: InvalidArgument (sizes),
  // Aborted (a server failed, e.g. workers disagree on a decision), DeadlineExceeded /
  // Unavailable (a server is late or gone), FailedPrecondition (an earlier Step failed,
  // or Finish was called). Not thread-safe.
  StatusOr<StepStats> Step(std::span<const float> local_grad_sum, int64_t local_batch);

  // Same contract as SyncEngine::Schedule: the decision takes effect at
  // decision.apply_at_iteration on every worker. Errors: InvalidArgument (fails
  // api::Validate, fixed_k with k > workers, a different decision with the same
  // apply_at_iteration and epoch), FailedPrecondition (apply_at_iteration already
  // passed), Unimplemented (groups). decision.groups is ignored for fixed_k (any k
  // gradients make an update).
  Status Schedule(const api::Decision& decision);

  // Tells every server this worker will send no more gradients (the servers' Run()
  // returns once all workers did). Later Steps fail with FailedPrecondition. Destroying
  // a worker without Finish() makes the servers fail (a worker gone).
  Status Finish();

  std::span<const float> params() const { return params_; }
  int64_t iteration() const { return iteration_; }
  api::SyncMode mode() const { return regime_.mode; }
  int worker_index() const;
  int num_workers() const;

 private:
  PsWorker(std::unique_ptr<Collective> world, int num_servers, ShardPlan plan);
  Status StepImpl(std::span<const float> grad, int64_t batch, StepStats& stats);
  Status SendToServers(float kind, std::span<const float> grad, int64_t batch);

  std::unique_ptr<Collective> world_;
  int num_servers_;
  ShardPlan plan_;
  size_t max_load_ = 0;
  std::vector<float> params_;
  std::vector<int64_t> versions_;  // per server: version of its shard in params_
  PsRegime regime_;
  api::Decision in_force_;  // the last decision switched to (ssgd at the start)
  int64_t iteration_ = 0;
  std::map<int64_t, api::Decision> pending_;  // by apply_at_iteration
  bool finished_ = false;
  Status failed_;
};

}  // namespace star::shim
