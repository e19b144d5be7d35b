// WorkerReport: what a worker's shim sends to the controller every few iterations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/status.h"

namespace star::api {

// Timings cover `iterations` consecutive iterations ending at `iteration`; the
// per-iteration values are the means over them. Times are in seconds.
inline constexpr int kMaxLookahead = 1024;

// The link into a worker from its ring predecessor, per iteration: the fastest hop of
// the iteration's ring all-reduces, `seconds` to receive `bytes` from worker `peer`. In a
// ring every member's all-reduce takes as long as its slowest link; the fastest hop
// shows each link's own speed (training-shim's gloo_ring.h), so a slow link is seen
// by the worker behind it.
struct LinkReading {
  int peer = 0;        // the sender, >= 0, not the reporting worker
  double seconds = 0;  // >= 0
  int64_t bytes = 0;   // >= 1
  friend bool operator==(const LinkReading&, const LinkReading&) = default;
};

// One stage of a pipeline-parallel job (rank = replica * S + stage), per micro-batch and
// per link: what the pipeline model (star/core/pipeline/schedule.h) needs to choose warm-up
// depths. Means over the report's iterations.
struct PipelineLinkReading {
  int peer = 0;              // the neighbouring stage's rank, >= 0, not the reporting worker
  double seconds = 0;        // >= 0: sending one message to it (until the transport held it)
  int64_t bytes = 0;         // >= 1: one message (an activation downstream, a gradient up)
  double wait_seconds = 0;   // >= 0, per iteration: this stage's compute waiting for its messages
  // >= 0: how long one message waits before it may be sent, on top of `seconds` (a
  // link's added latency, which delays a message without occupying the link).
  double latency_seconds = 0;
  friend bool operator==(const PipelineLinkReading&, const PipelineLinkReading&) = default;
};
struct PipelineReading {
  int stage = 0;                  // >= 0
  double forward_seconds = 0;     // >= 0, one micro-batch's forward
  double backward_seconds = 0;    // >= 0, one micro-batch's backward
  std::vector<PipelineLinkReading> links;  // at most 2: the previous stage's link first
  friend bool operator==(const PipelineReading&, const PipelineReading&) = default;
};

struct WorkerReport {
  std::string job;               // "<namespace>/<name>" or a local job name; may be empty
  int worker = 0;                // rank, >= 0
  int64_t iteration = 0;         // last iteration covered, >= 0
  int iterations = 1;            // how many iterations the means cover, >= 1
  double time_seconds = 0;       // when the report was made (job-relative clock), >= 0
  double compute_seconds = 0;    // per iteration: forward + backward (+ optimizer), >= 0
  double communication_seconds = 0;  // per iteration: own share of communication, >= 0
  double wait_seconds = 0;       // per iteration: blocked on slower peers, >= 0
  int local_batch = 0;           // samples per iteration on this worker, >= 1
  bool amp = false;              // mixed precision was on
  // Squared L2 norms of this worker's local gradient and of the aggregated gradient
  // (for the online noise scale); absent when not measured.
  std::optional<double> local_grad_sq_norm;
  std::optional<double> global_grad_sq_norm;
  std::optional<double> loss;
  // Test accuracy in [0, 1] that the trainer measured, and the job-relative time it was
  // measured (>= 0; on the wire it may be left out, and then it is time_seconds); both
  // absent when the report carries no accuracy. accuracy_time_seconds is set only with
  // accuracy.
  std::optional<double> accuracy;
  std::optional<double> accuracy_time_seconds;
  // Batches the worker's data loader has already drawn past `iteration` (prefetching):
  // a decision that changes batches must reach the worker before the batch of its
  // iteration is drawn, so the controller schedules decisions at least this far ahead.
  // In [0, kMaxLookahead]; absent (0) when the trainer does not draw ahead.
  std::optional<int> lookahead;
  // Absent when the collective does not time its links (NCCL, parameter servers, a
  // single worker). On the wire: link_peer, link_seconds, link_bytes, all three or none.
  std::optional<LinkReading> link;
  // A pipeline stage's costs; absent for data-parallel workers. On the wire an object
  // "pipeline": {"stage", "forward_seconds", "backward_seconds", "links": [{"peer",
  // "seconds", "bytes", "wait_seconds"}]}.
  std::optional<PipelineReading> pipeline;

  // compute + communication: the iteration time excluding waiting on others (t_i).
  double iteration_seconds() const { return compute_seconds + communication_seconds; }
};

nlohmann::json ToJson(const PipelineReading& p);
nlohmann::json ToJson(const WorkerReport& r);
// Validates every field; errors name the field ("worker: must be >= 0, got -1",
// "accuracy: must be <= 1, got 1.5", "accuracy_time_seconds: only allowed with accuracy").
// A report with accuracy but no accuracy_time_seconds gets accuracy_time_seconds =
// time_seconds.
StatusOr<WorkerReport> WorkerReportFromJson(const nlohmann::json& j, const std::string& path = "");

}  // namespace star::api
