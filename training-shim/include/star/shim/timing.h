// IterationTimer: per-iteration compute, communication and wait times of one worker,
// aggregated into the api::WorkerReport the controller reads (docs/ARCHITECTURE.md step 1).
//
// The caller marks phases; the timer reads a clock. Compute and communication are
// measured between Begin*/End*; wait (time blocked on slower peers) is what the engine
// reports with AddWait. Several segments of the same phase in one iteration add up.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "star/core/api/worker_report.h"
#include "star/core/status.h"

namespace star::shim {

// Seconds on std::chrono::steady_clock (monotonic; arbitrary origin).
double MonotonicSeconds();

// Squared L2 norm of v, accumulated in double (in eight partial sums, so the result may
// differ from a left-to-right sum in the last bits). 0 for an empty span. O(v.size()).
double SquaredL2Norm(std::span<const float> v);

// What the caller knows about an iteration besides its timing.
struct IterationInfo {
  int64_t iteration = 0;  // this iteration's number, >= 0
  int local_batch = 1;    // samples on this worker, >= 1
  bool amp = false;       // mixed precision was on
  std::optional<double> local_grad_sq_norm = std::nullopt;   // absent = not measured this iteration
  std::optional<double> global_grad_sq_norm = std::nullopt;  // absent = not measured this iteration
  std::optional<double> loss = std::nullopt;                 // absent = not measured this iteration
  std::optional<int> lookahead = std::nullopt;  // api::WorkerReport::lookahead; absent = none
  // The link from the ring predecessor in this iteration's all-reduces (StepStats::link);
  // absent = not timed.
  std::optional<api::LinkReading> link = std::nullopt;
  // A pipeline stage's forward and backward per micro-batch, and per link the time to
  // send one message, its size and the iteration's wait for it; absent = not a pipeline.
  std::optional<api::PipelineReading> pipeline = std::nullopt;
};

// One finished iteration: its phase times (seconds) and its IterationInfo.
struct IterationSample {
  double compute_seconds = 0;
  double communication_seconds = 0;  // measured communication minus the wait inside it
  double wait_seconds = 0;
  IterationInfo info;

  // compute + communication, excluding wait: api::WorkerReport::iteration_seconds().
  double iteration_seconds() const { return compute_seconds + communication_seconds; }
};

struct IterationTimerOptions {
  std::string job;     // copied into reports; default "" (see api::WorkerReport::job)
  int worker = 0;      // rank copied into reports, >= 0; default 0
  // The clock, in seconds; must not go backwards. Default (empty): MonotonicSeconds.
  std::function<double()> now;
  // Clock reading that report times (WorkerReport::time_seconds) are relative to.
  // Default (absent): the clock's reading when the timer is constructed.
  std::optional<double> origin_seconds;
};

// Not thread-safe: one timer belongs to the thread that runs the training loop.
// The methods that return Status fail with FailedPrecondition on misuse (ending a phase
// that is not open, opening one twice, ending an iteration with a phase open) and then
// change nothing. Compute and communication may overlap (e.g. gradient buckets sent
// during backward); each is then counted in full.
class IterationTimer {
 public:
  explicit IterationTimer(IterationTimerOptions options = {});

  [[nodiscard]] Status BeginCompute();
  [[nodiscard]] Status EndCompute();
  [[nodiscard]] Status BeginCommunication();
  [[nodiscard]] Status EndCommunication();

  // Adds `seconds` (>= 0, else InvalidArgument) of waiting on peers to this iteration.
  // A wait reported while a communication phase is open is taken out of that phase's
  // time (never below 0): the engine's collective call blocks on slower peers, and
  // that time is wait, not communication.
  [[nodiscard]] Status AddWait(double seconds);

  // Closes the current iteration: returns its sample and adds it to the pending report.
  // InvalidArgument naming the field for info.iteration < 0 or info.local_batch < 1.
  [[nodiscard]] StatusOr<IterationSample> EndIteration(const IterationInfo& info);

  // Iterations ended since the last TakeReport.
  int pending_iterations() const { return n_; }

  // The job-relative time now: the clock's reading minus the origin (never below 0), as
  // TakeReport sets time_seconds.
  double elapsed_seconds() const;

  // The pending iterations as one report, then starts a new one. Times, gradient norms
  // and loss are per-iteration means (a norm or loss over the iterations that measured
  // it; absent if none did); iteration, local_batch and amp are the last iteration's
  // (end a report before a batch or AMP change to keep one setting per report);
  // time_seconds is now - origin. FailedPrecondition when no iteration is pending.
  [[nodiscard]] StatusOr<api::WorkerReport> TakeReport();

 private:
  struct Mean {
    double sum = 0;
    int count = 0;
    void Add(const std::optional<double>& v) {
      if (v) { sum += *v; ++count; }
    }
    std::optional<double> Get() const {
      return count > 0 ? std::optional<double>(sum / count) : std::nullopt;
    }
  };

  IterationTimerOptions options_;
  double origin_ = 0;
  // Current iteration.
  std::optional<double> compute_start_;
  std::optional<double> comm_start_;
  double comm_wait_ = 0;  // wait reported while the open communication phase ran
  double compute_ = 0;
  double comm_ = 0;
  double wait_ = 0;
  // Pending report.
  int n_ = 0;
  double compute_sum_ = 0;
  double comm_sum_ = 0;
  // Sums of the iterations' link readings since the last report, and how many there were.
  api::LinkReading link_sum_;
  int link_n_ = 0;
  api::PipelineReading pipeline_sum_;
  int pipeline_n_ = 0;
  double wait_sum_ = 0;
  Mean local_norm_, global_norm_, loss_;
  IterationInfo last_;
};

}  // namespace star::shim
