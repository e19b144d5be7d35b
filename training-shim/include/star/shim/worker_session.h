// WorkerSession: a worker's half of the report protocol (docs/ARCHITECTURE.md steps 1-4) for
// any trainer. It times iterations (IterationTimer), sends a WorkerReport every
// report_every iterations to the controller, receives its Decisions, and tells the
// trainer at the start of each iteration what is in force: the sync mode, k and groups,
// whether AMP is on for this worker, and its local batch. A decision's settings take
// effect exactly at its apply_at_iteration. It also serves the worker's Prometheus
// metrics (star_worker_*, worker_metrics.h) when configured.
//
// Reports go out on a background thread. By default the iteration that sends one waits
// for its answer (at most report_timeout x 2), as the control loop's apply_at_iteration
// assumes; with wait_for_answers = false training runs on meanwhile. A report that fails
// (controller down, refused, timed out) costs that report only; the error goes to WorkerSessionOptions::on_report_error and is counted
// in report_stats(). Decisions arrive with the responses and are taken up at the next
// BeginIteration. The controller repeats its latest decision on every response: only a
// decision with a newer epoch than any seen before is news; others are ignored.
//
// A decision also has to reach the gradient exchange before its iteration: hand each of
// IterationPlan::received to Synchronizer::Schedule (synchronizer.h) before that
// iteration's exchange.
//
// Thread-compatibility: not thread-safe. Call every method from one thread (the
// training loop); report_stats() may be called from any thread. LibTorch-free: plain
// structs only, so it binds to Python as it is.
//
// Typical loop:
//   auto plan = session->BeginIteration(sync->iteration());
//   for (const auto& d : plan->received) sync->Schedule(d);
//   session->BeginCompute(); ...forward/backward with plan->amp, plan->local_batch...
//   session->EndCompute(); session->BeginCommunication();
//   auto step = sync->Step(grad_sum, batch); session->AddWait(step->wait_seconds);
//   session->EndCommunication(); session->EndIteration(info);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "star/core/api/decision.h"
#include "star/core/api/types.h"
#include "star/core/status.h"
#include "star/shim/timing.h"
#include "star/shim/worker_config.h"
#include "star/shim/worker_metrics.h"

namespace star::shim {

namespace internal {
class ReportSender;
}  // namespace internal

struct WorkerSessionOptions {
  // job, rank, parameter_servers, world_size, controller_url, token, report_ca_file,
  // report_ca_data, report_every, metrics_address and clock_origin are used. Default: WorkerConfig's defaults.
  WorkerConfig config;
  int64_t local_batch = 32;  // this worker's batch until a decision changes it; >= 1. Default 32
  bool amp = false;          // AMP until a decision changes it. Default off
  std::chrono::milliseconds report_timeout{5000};  // per report request; > 0. Default 5 s
  // Reports waiting to be sent; when full the oldest waiting one is dropped (the next
  // carries fresher data). >= 1. Default 16.
  int max_queued_reports = 16;
  // Whether the iteration that sends a report waits for its answer (at most
  // report_timeout; a failed report still never stops training). The control loop picks
  // apply_at_iteration so that every worker, the slowest included, learns a decision on a
  // report before it gets there; a worker that kept training while its report was in
  // flight could pass that iteration and apply the decision on a different iteration from
  // its peers (the engine then aborts the step). Default true; false lets training run
  // ahead of the controller (a trainer whose own exchange keeps workers apart by less
  // than the loop's margin).
  bool wait_for_answers = true;
  // Called on the sender thread with each failed report's error. Default: one line on
  // stderr, "star: report: <error>".
  std::function<void(const Status&)> on_report_error;
  // The timer's clock in seconds (tests). Default: MonotonicSeconds.
  std::function<double()> now;
};

// What is in force for one iteration.
struct IterationPlan {
  int64_t iteration = 0;
  int64_t decision_epoch = -1;  // the decision in force; -1 = none yet (the initial ssgd)
  api::SyncMode mode = api::SyncMode::kSsgd;
  int k = 0;                                // fixed_k: ring size; initially world_size
  std::vector<std::vector<int>> groups;     // groups / fixed_k order; initially empty
  bool amp = false;                         // AMP on for this worker
  int64_t local_batch = 0;                  // this worker's batch
  std::vector<int> warmup;                  // a pipeline's warm-up depth per stage; empty = static
  // Decisions received since the previous BeginIteration (newer epochs, in arrival
  // order): give each to Synchronizer::Schedule before this iteration's exchange.
  std::vector<api::Decision> received;
};

// Counters of the report sender (monotonic over the session).
struct ReportStats {
  int64_t queued = 0;     // reports handed to the sender
  int64_t answered = 0;   // reports the controller accepted
  int64_t failed = 0;     // reports that failed (down, refused, timed out)
  int64_t dropped = 0;    // reports dropped unsent because the queue was full
  int64_t decisions = 0;  // decisions received with a newer epoch than any before
  std::string last_error; // the latest failure; "" = none
};

class WorkerSession {
 public:
  // Errors: InvalidArgument naming the field (Validate(config), this rank is a parameter
  // server, local_batch, report_timeout, max_queued_reports, controller_url not an
  // http(s) URL, a report CA that cannot be read or is not PEM, or one given for an
  // http:// controller_url: ReportClient::Create's errors); Unavailable (the metrics
  // endpoint cannot listen).
  static StatusOr<std::unique_ptr<WorkerSession>> Create(WorkerSessionOptions options);
  // Queues a final report of the pending iterations when ReportAccuracy holds an accuracy
  // (see there), sends the reports still queued (each bounded by report_timeout), then
  // stops.
  ~WorkerSession();
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  // Starts `iteration` (the synchronizer's iteration(); non-decreasing, it may skip
  // numbers): takes up decisions received meanwhile and applies every held decision whose
  // apply_at_iteration <= iteration. Errors: InvalidArgument (iteration lower than a
  // previous one), FailedPrecondition (a new decision whose apply_at_iteration already
  // passed: this worker cannot switch with the others and should stop).
  [[nodiscard]] StatusOr<IterationPlan> BeginIteration(int64_t iteration);

  // Phase marks, as IterationTimer's (FailedPrecondition on misuse).
  [[nodiscard]] Status BeginCompute();
  [[nodiscard]] Status EndCompute();
  [[nodiscard]] Status BeginCommunication();
  [[nodiscard]] Status EndCommunication();
  [[nodiscard]] Status AddWait(double seconds);

  // Whether the iteration now open ends a report (measure gradient norms only then).
  bool report_due() const;

  // Ends the iteration: records it (metrics included) and, when a report is due, queues
  // it for sending (with the accuracy ReportAccuracy holds, if any). Returns the
  // iteration's sample. Errors as IterationTimer::EndIteration.
  [[nodiscard]] StatusOr<IterationSample> EndIteration(const IterationInfo& info);

  // A test accuracy the trainer measured just now, for the job's accuracy curve and time
  // to accuracy (the controller's control loop keeps them). It is stamped with the
  // job-relative time now (the session's clock and clock_origin, as a report's
  // time_seconds) and held until the next report this session sends, which carries it as
  // accuracy and accuracy_time_seconds; of several reported before that report only the
  // newest is kept. Flush sends a report of the iterations ended since the last report
  // when an accuracy is held, and the destructor sends one whenever iterations are pending
  // (with the accuracy, if held); with no iteration pending there
  // is nothing to report (a report covers at least one iteration): the accuracy waits
  // for the next report, and is lost if the session ends first, so a trainer that
  // evaluates after its last iteration should report before ending that iteration or end
  // one more. Without a controller it is checked and dropped. InvalidArgument ("accuracy:
  // must be finite and in [0, 1], got 1.5") and nothing changes otherwise.
  [[nodiscard]] Status ReportAccuracy(double accuracy);

  // Sends a report of the pending iterations when ReportAccuracy holds an accuracy (see
  // there), then waits until every queued report has been answered or has failed.
  // DeadlineExceeded if that takes longer than `timeout`. For orderly shutdown and tests.
  [[nodiscard]] Status Flush(std::chrono::milliseconds timeout);

  ReportStats report_stats() const;  // thread-safe
  // The Prometheus endpoint's port; 0 when metrics are off.
  int metrics_port() const;
  int worker() const { return worker_; }

 private:
  WorkerSession(WorkerSessionOptions options, std::unique_ptr<internal::ReportSender> sender);
  Status TakeUp(int64_t iteration, IterationPlan& plan);
  void ApplyDue(int64_t iteration);
  // Queues a report of the pending iterations with the held accuracy, if any.
  Status QueueReport();
  // Pending iterations: queues their report with the held accuracy; without one, only
  // when `without_accuracy` (the destructor: the controller learns every iteration).
  void QueuePendingReport(bool without_accuracy);

  // An accuracy from ReportAccuracy waiting for a report.
  struct HeldAccuracy {
    double accuracy = 0;
    double time_seconds = 0;  // job-relative, when it was reported
  };

  WorkerSessionOptions options_;
  int worker_ = 0;
  IterationTimer timer_;
  std::unique_ptr<internal::ReportSender> sender_;  // null without a controller
  std::unique_ptr<WorkerMetrics> metrics_;  // null when metrics are off
  IterationPlan in_force_;
  std::map<int64_t, api::Decision> held_;  // by apply_at_iteration, not yet in force
  int64_t last_epoch_ = -1;
  int64_t last_iteration_ = -1;
  std::optional<HeldAccuracy> accuracy_;
  double last_report_seconds_ = 0;  // timer_.elapsed_seconds() at the last report
};

}  // namespace star::shim
