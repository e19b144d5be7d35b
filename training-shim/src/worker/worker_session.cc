#include "star/shim/worker_session.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "star/core/api/json_reader.h"
#include "worker/report_sender.h"

namespace star::shim {
namespace {

void LogReportError(const Status& s) {
  std::fprintf(stderr, "star: report: %s\n", s.ToString().c_str());
}

Status CheckOptions(const WorkerSessionOptions& o) {
  STAR_RETURN_IF_ERROR(Validate(o.config));
  if (o.config.is_server()) {
    return Status::InvalidArgument("config.rank: " + std::to_string(o.config.rank) +
                                   " is a parameter server (< parameter_servers " +
                                   std::to_string(o.config.parameter_servers) + "), not a worker");
  }
  if (o.local_batch < 1) {
    return Status::InvalidArgument("local_batch: must be >= 1, got " + std::to_string(o.local_batch));
  }
  if (o.report_timeout.count() <= 0) {
    return Status::InvalidArgument("report_timeout: must be > 0 ms, got " +
                                   std::to_string(o.report_timeout.count()));
  }
  return Status::Ok();
}

IterationTimerOptions TimerOptions(const WorkerSessionOptions& o) {
  IterationTimerOptions t;
  t.job = o.config.job;
  t.worker = o.config.worker();
  t.now = o.now;
  t.origin_seconds = o.config.clock_origin;
  return t;
}

}  // namespace

StatusOr<std::unique_ptr<WorkerSession>> WorkerSession::Create(WorkerSessionOptions options) {
  STAR_RETURN_IF_ERROR(CheckOptions(options));
  std::unique_ptr<internal::ReportSender> sender;
  if (!options.config.controller_url.empty()) {
    auto on_error = options.on_report_error ? options.on_report_error : LogReportError;
    report::ReportClientOptions client{options.config.controller_url, options.config.token,
                                       options.report_timeout, options.config.report_ca_file,
                                       options.config.report_ca_data};
    STAR_ASSIGN_OR_RETURN(sender, internal::ReportSender::Create(std::move(client),
                                                                 options.max_queued_reports,
                                                                 std::move(on_error)));
  }
  std::unique_ptr<WorkerMetrics> metrics;
  if (!options.config.metrics_address.empty()) {
    STAR_ASSIGN_OR_RETURN(metrics, WorkerMetrics::Start(options.config.metrics_address,
                                                        options.config.job, options.config.worker(),
                                                        options.config.node));
  }
  auto session = std::unique_ptr<WorkerSession>(new WorkerSession(std::move(options), std::move(sender)));
  session->metrics_ = std::move(metrics);
  return session;
}

WorkerSession::WorkerSession(WorkerSessionOptions options,
                             std::unique_ptr<internal::ReportSender> sender)
    : options_(std::move(options)),
      worker_(options_.config.worker()),
      timer_(TimerOptions(options_)),
      sender_(std::move(sender)) {
  in_force_.k = options_.config.world_size;
  in_force_.amp = options_.amp;
  in_force_.local_batch = options_.local_batch;
}

WorkerSession::~WorkerSession() { QueuePendingReport(/*without_accuracy=*/true); }

StatusOr<IterationPlan> WorkerSession::BeginIteration(int64_t iteration) {
  if (iteration < last_iteration_) {
    return Status::InvalidArgument("iteration: " + std::to_string(iteration) +
                                   " is before the previous one, " + std::to_string(last_iteration_));
  }
  last_iteration_ = iteration;
  IterationPlan plan;
  STAR_RETURN_IF_ERROR(TakeUp(iteration, plan));
  ApplyDue(iteration);
  std::vector<api::Decision> received = std::move(plan.received);
  plan = in_force_;
  plan.iteration = iteration;
  plan.received = std::move(received);
  return plan;
}

// Holds the decisions that arrived since the last call (newer epochs only).
Status WorkerSession::TakeUp(int64_t iteration, IterationPlan& plan) {
  if (sender_ == nullptr) return Status::Ok();
  for (api::Decision& d : sender_->TakeDecisions()) {
    if (d.epoch <= last_epoch_) continue;  // the controller repeating itself
    if (d.apply_at_iteration < iteration) {
      return Status::FailedPrecondition(
          "decision.apply_at_iteration: " + std::to_string(d.apply_at_iteration) +
          " already passed on worker " + std::to_string(worker_) + " (at iteration " +
          std::to_string(iteration) + ")");
    }
    last_epoch_ = d.epoch;
    held_[d.apply_at_iteration] = d;
    plan.received.push_back(std::move(d));
  }
  return Status::Ok();
}

// Puts every held decision due by `iteration` in force, oldest first.
void WorkerSession::ApplyDue(int64_t iteration) {
  while (!held_.empty() && held_.begin()->first <= iteration) {
    const api::Decision& d = held_.begin()->second;
    in_force_.decision_epoch = d.epoch;
    in_force_.mode = d.mode;
    in_force_.k = d.k;
    in_force_.groups = d.groups;
    in_force_.warmup = d.warmup;
    for (const auto& w : d.workers) {
      if (w.worker != worker_) continue;
      in_force_.amp = w.amp;
      in_force_.local_batch = w.batch;
    }
    held_.erase(held_.begin());
  }
}

Status WorkerSession::BeginCompute() { return timer_.BeginCompute(); }
Status WorkerSession::EndCompute() { return timer_.EndCompute(); }
Status WorkerSession::BeginCommunication() { return timer_.BeginCommunication(); }
Status WorkerSession::EndCommunication() { return timer_.EndCommunication(); }
Status WorkerSession::AddWait(double seconds) { return timer_.AddWait(seconds); }

bool WorkerSession::report_due() const {
  if (sender_ == nullptr) return false;
  const double seconds = options_.config.report_seconds;
  return timer_.pending_iterations() + 1 >= options_.config.report_every ||
         (seconds > 0 && timer_.elapsed_seconds() - last_report_seconds_ >= seconds);
}

StatusOr<IterationSample> WorkerSession::EndIteration(const IterationInfo& info) {
  const bool due = report_due();
  STAR_ASSIGN_OR_RETURN(IterationSample sample, timer_.EndIteration(info));
  if (metrics_ != nullptr) metrics_->Observe(sample);
  if (due) {
    STAR_RETURN_IF_ERROR(QueueReport());
    // The answer, or the report's own timeout: failures are counted, never fatal.
    if (options_.wait_for_answers) (void)sender_->Flush(options_.report_timeout * 2);
  }
  return sample;
}

Status WorkerSession::QueueReport() {
  STAR_ASSIGN_OR_RETURN(api::WorkerReport report, timer_.TakeReport());
  last_report_seconds_ = timer_.elapsed_seconds();
  if (accuracy_) {
    report.accuracy = accuracy_->accuracy;
    report.accuracy_time_seconds = accuracy_->time_seconds;
    accuracy_.reset();
  }
  sender_->Enqueue(std::move(report));
  return Status::Ok();
}

void WorkerSession::QueuePendingReport(bool without_accuracy) {
  if (sender_ == nullptr || timer_.pending_iterations() == 0) return;
  if (!accuracy_ && !without_accuracy) return;
  (void)QueueReport();  // cannot fail: iterations are pending
}

Status WorkerSession::ReportAccuracy(double accuracy) {
  if (!std::isfinite(accuracy) || accuracy < 0 || accuracy > 1) {
    return Status::InvalidArgument("accuracy: must be finite and in [0, 1], got " +
                                   api::FormatNumber(accuracy));
  }
  if (sender_ == nullptr) return Status::Ok();
  accuracy_ = HeldAccuracy{accuracy, timer_.elapsed_seconds()};
  return Status::Ok();
}

Status WorkerSession::Flush(std::chrono::milliseconds timeout) {
  QueuePendingReport(/*without_accuracy=*/false);
  return sender_ != nullptr ? sender_->Flush(timeout) : Status::Ok();
}

ReportStats WorkerSession::report_stats() const {
  return sender_ != nullptr ? sender_->stats() : ReportStats{};
}

int WorkerSession::metrics_port() const { return metrics_ != nullptr ? metrics_->port() : 0; }

}  // namespace star::shim
