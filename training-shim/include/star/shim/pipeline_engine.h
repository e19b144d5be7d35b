// PipelineEngine: one stage of a pipeline-parallel job (docs/ARCHITECTURE.md, pipeline
// contract). A job of D replicas of S stages has rank = replica * S + stage; each stage
// is one process holding its slice of the model. An iteration runs M micro-batches by a
// 1F1B schedule with the stage's warm-up depth (pipeline::StageOps): activations go to
// the next stage, gradients back to the previous one, each direction of each link on its
// own communication thread with its own buffers (link_channel.h), so compute waits only
// for a message it needs. The engine times every link (bytes, seconds sending, seconds
// its compute waited) for the worker's reports.
//
// The engine runs the schedule; the caller's StageFunctions run the model slice (they
// keep whatever a backward needs from its forward, e.g. autograd graphs per micro-batch)
// and step the optimizer after RunIteration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "star/core/api/worker_report.h"
#include "star/core/pipeline/schedule.h"
#include "star/core/status.h"
#include "star/shim/collective.h"

namespace star::shim {

struct PipelineShape {
  int stages = 1;          // S
  int stage = 0;           // this process's stage, in [0, S)
  int micro_batches = 1;   // M >= S
  size_t input_floats = 0;   // one micro-batch's activation from the previous stage (stage > 0)
  size_t output_floats = 0;  // to the next stage (stage < S - 1); its gradient has the same size
  // Added one-way delay of this stage's messages to the previous and the next stage, in
  // seconds, in [0, 10] (link_channel.h's Outbox): a slow link's latency for tests and
  // `star local --inject worker=W,delay=D,peer=P`, where the kernel has no netem.
  double prev_delay_seconds = 0;
  double next_delay_seconds = 0;
};

struct StageFunctions {
  // The forward of micro-batch `micro` (0-based within the iteration): `input` is the
  // previous stage's activation (empty on stage 0, which reads its own data); fills
  // `output` with output_floats floats (left empty on the last stage, which computes
  // its loss).
  std::function<Status(int micro, std::span<const float> input, std::vector<float>& output)> forward;
  // The backward of `micro`: `grad_output` is the next stage's gradient of this stage's
  // output (empty on the last stage); fills `grad_input` with input_floats floats (left
  // empty on stage 0).
  std::function<Status(int micro, std::span<const float> grad_output, std::vector<float>& grad_input)>
      backward;
};

// One neighbour's link as this stage saw it since the last TakeLinks.
struct PipelineLink {
  int peer = -1;               // the neighbour's rank in the communicator given to Connect
  int64_t bytes_sent = 0;      // this stage's messages to it (activations or gradients)
  int messages_sent = 0;
  double send_seconds = 0;     // Send until the transport held the data, summed
  int64_t bytes_received = 0;
  int messages_received = 0;
  double wait_seconds = 0;     // this stage's compute waiting for its messages, summed
  double latency_seconds = 0;  // the added delay its messages to it were held for, summed
};

// This stage's own compute since the last TakeComputeTimes: its forwards and backwards
// (the StageFunctions' calls), not the waits for messages around them.
struct PipelineComputeTimes {
  double forward_seconds = 0;
  int forwards = 0;
  double backward_seconds = 0;
  int backwards = 0;
};

// What a stage's report carries (api::PipelineReading): its forward and backward per
// micro-batch and, per link, one message's sending time, size and latency, and the
// stage's waits for it, over what `c` and `links` (from TakeComputeTimes and TakeLinks)
// cover.
api::PipelineReading ReadingOf(int stage, const PipelineComputeTimes& c, const std::vector<PipelineLink>& links);

class PipelineEngine {
 public:
  // This stage's engine: `world` holds every stage of this replica at consecutive ranks
  // (rank % S is the stage). Collective over the stage and its neighbours (each pair of
  // neighbours splits two communicators off `world`, one per direction), bounded by
  // `world`'s timeout. InvalidArgument naming the field: stages or stage out of range,
  // micro_batches < stages, a stage that is not rank % stages, a neighbour outside
  // `world`, a missing activation size or function.
  [[nodiscard]] static StatusOr<std::unique_ptr<PipelineEngine>> Connect(Collective& world,
                                                                         const PipelineShape& shape,
                                                                         StageFunctions functions);
  // Stops the communication threads: sends what is queued, and waits for a receive in
  // flight (after a failure: at most the communicator's timeout, as the neighbour that
  // would have sent it may be waiting on this stage).
  ~PipelineEngine();

  // One iteration of M micro-batches with warm-up depth `warmup` (InvalidArgument
  // naming warmup outside [1, M]); every stage of the pipeline calls it. The first
  // failure (a function's, or a link's: Unavailable or DeadlineExceeded naming the peer)
  // is returned and breaks the engine: later calls return it.
  [[nodiscard]] Status RunIteration(int warmup);

  // Per neighbour (previous first), what its link did since the last call.
  std::vector<PipelineLink> TakeLinks();
  PipelineComputeTimes TakeComputeTimes();

  const PipelineShape& shape() const { return shape_; }

 private:
  struct Neighbour;
  PipelineEngine(const PipelineShape& shape, StageFunctions functions);
  Status Step(const pipeline::StageOp& op, uint64_t tag);

  PipelineShape shape_;
  StageFunctions fns_;
  std::unique_ptr<Neighbour> prev_;  // null on stage 0
  std::unique_ptr<Neighbour> next_;  // null on the last stage
  uint64_t iteration_ = 0;
  PipelineComputeTimes compute_;
  Status broken_;
};

}  // namespace star::shim
