// The pipeline model (ALGORITHMS.md section 7, Adaptra): how long one iteration of a
// 1F1B pipeline takes with given stage and link costs, and which warm-up depths absorb a
// slow link.
//
// A pipeline of S stages runs M micro-batches per iteration. Stage i first runs w_i
// forwards (its warm-up depth), then alternates one backward and one forward until its
// forwards are done, then the remaining backwards; w_i is also the most micro-batches
// it holds activations for. Plain 1F1B has w_i = S - i. A forward of micro-batch j on
// stage i > 0 needs stage i-1's activation of j, a backward on stage i < S-1 stage i+1's
// gradient of j, and the last stage's backward its own forward. Transfers run on
// communication threads (compute never waits on a send), one at a time per link and
// direction, in the order the sender produced them. A link's latency holds a message
// before it may go without occupying the link (messages overlap in it), so a message
// ready at r arrives at max(r + latency, when the link is free) + its transfer time.
//
// A slow link between stages i and i+1 delays every gradient stage i waits for; more
// forwards in flight ahead of it (a deeper warm-up upstream) keep stage i busy meanwhile.
// Adaptra's rule for a schedule that splits the backward (B, W) adds 2 per stage plus
// ceil(d / t_F,i); 1F1B's backward is one op, so here
//   w_(S-1) = 1,  w_i = w_(i+1) + 1 + ceil(d_i / t_F,i),
// d_i the link's round trip per micro-batch beyond the fastest link's (no extra delay
// gives plain 1F1B), each w_i capped by M and the memory bound. ChooseWarmup takes that
// rule's depths, or plain 1F1B's, or anything a greedy search over single-stage
// increments finds faster, whichever the model predicts fastest.
// Pure: no clock, no I/O. IterationSeconds is O(S * M) per call.
#pragma once

#include <optional>
#include <vector>

#include "star/core/status.h"

namespace star::pipeline {

// Seconds per micro-batch.
struct StageCost {
  double forward_seconds = 0;
  double backward_seconds = 0;
};
// Link i joins stage i and stage i+1: activations go down it, gradients up. The
// seconds occupy the link per message; the latency delays each message without.
struct LinkCost {
  double activation_seconds = 0;
  double gradient_seconds = 0;
  double activation_latency_seconds = 0;
  double gradient_latency_seconds = 0;
};

// One micro-batch's round trip over the link: both transfers and both latencies.
double RoundTripSeconds(const LinkCost& link);

struct PipelineCosts {
  std::vector<StageCost> stages;  // S >= 1
  std::vector<LinkCost> links;    // S - 1
  int micro_batches = 1;          // M >= S
};

// InvalidArgument naming the field when the costs are not a pipeline: S in [1, 64],
// links S - 1, M in [S, 1024], every cost finite and >= 0.
[[nodiscard]] Status Validate(const PipelineCosts& costs);

// Plain 1F1B: w_i = min(S - i, M).
std::vector<int> OneFOneB(int stages, int micro_batches);

// One step of a stage's schedule: the forward or the backward of a micro-batch.
struct StageOp {
  bool forward = true;
  int micro_batch = 0;
  bool operator==(const StageOp&) const = default;
};

// A stage's order with warm-up depth `warmup` (clamped to [1, micro_batches]) over
// `micro_batches` micro-batches: warmup forwards, then one backward and one forward
// until the forwards are done, then the remaining backwards (2 * micro_batches steps).
std::vector<StageOp> StageOps(int warmup, int micro_batches);

// The model's iteration time (first forward to last backward) with warm-up depths
// `warmup`: S entries, each in [1, M], non-increasing (a stage ahead of one deeper than
// it would wait for activations it never sends). InvalidArgument otherwise.
[[nodiscard]] StatusOr<double> IterationSeconds(const PipelineCosts& costs,
                                                const std::vector<int>& warmup);

// The warm-up rule above for these costs, capped by `max_in_flight` (nullopt: by M).
[[nodiscard]] StatusOr<std::vector<int>> AdaptedWarmup(const PipelineCosts& costs,
                                                       std::optional<int> max_in_flight);

struct Plan {
  std::vector<int> warmup;
  double predicted_seconds = 0;  // IterationSeconds(costs, warmup)
  double static_seconds = 0;     // IterationSeconds(costs, OneFOneB(...))
};

// The fastest schedule the model finds within `max_in_flight` (nullopt: M), which must
// be >= S. Never slower than plain 1F1B by the model.
[[nodiscard]] StatusOr<Plan> ChooseWarmup(const PipelineCosts& costs,
                                          std::optional<int> max_in_flight);

}  // namespace star::pipeline
