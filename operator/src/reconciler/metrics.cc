#include "star/operator/reconciler/metrics.h"

#include <sstream>

#include <prometheus/text_serializer.h>

namespace star::op {
namespace {
constexpr const char* kReallocationOutcomes[] = {"applied", "skipped", "error", "undone"};
constexpr api::SyncMode kModes[] = {api::SyncMode::kSsgd, api::SyncMode::kFixedK,
                                    api::SyncMode::kGroups, api::SyncMode::kAsgd};
}  // namespace

prometheus::Labels JobLabels(const std::string& job, prometheus::Labels more) {
  const size_t slash = job.find('/');
  if (slash == std::string::npos) {
    more["trainingjob"] = job;
  } else {
    more["namespace"] = job.substr(0, slash);
    more["trainingjob"] = job.substr(slash + 1);
  }
  return more;
}

OperatorMetrics::OperatorMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      reconcile_total_(prometheus::BuildCounter()
                           .Name("star_operator_reconcile_total")
                           .Help("TrainingJob reconciles by result")
                           .Register(*registry_)),
      reconcile_seconds_(prometheus::BuildHistogram()
                             .Name("star_operator_reconcile_duration_seconds")
                             .Help("Duration of one TrainingJob reconcile")
                             .Register(*registry_)
                             .Add({}, prometheus::Histogram::BucketBoundaries{
                                          0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1,
                                          3, 10})),
      sync_mode_(prometheus::BuildGauge()
                     .Name("star_job_sync_mode")
                     .Help("1 for the synchronization mode in force, else 0")
                     .Register(*registry_)),
      stragglers_(prometheus::BuildGauge()
                      .Name("star_job_stragglers")
                      .Help("Workers currently detected as stragglers")
                      .Register(*registry_)),
      worker_straggler_(prometheus::BuildGauge()
                            .Name("star_job_worker_straggler")
                            .Help("1 while the control loop flags the worker with this cause and kind")
                            .Register(*registry_)),
      decisions_(prometheus::BuildCounter()
                     .Name("star_job_decisions_total")
                     .Help("Decisions issued by the job's control loop, per kind of change")
                     .Register(*registry_)),
      reports_(prometheus::BuildCounter()
                   .Name("star_job_reports_total")
                   .Help("Worker reports the report endpoint accepted")
                   .Register(*registry_)),
      decision_latency_(prometheus::BuildHistogram()
                            .Name("star_job_decision_latency_seconds")
                            .Help("Control-loop time on a report that produced a decision")
                            .Register(*registry_)
                            .Add({}, prometheus::Histogram::BucketBoundaries{
                                         0.00001, 0.0001, 0.001, 0.01, 0.1, 1})),
      tta_(prometheus::BuildGauge()
               .Name("star_job_estimated_tta_seconds")
               .Help("Job time at which the control loop estimates the target accuracy is reached")
               .Register(*registry_)),
      accuracy_(prometheus::BuildGauge()
                    .Name("star_job_accuracy")
                    .Help("Latest test accuracy the job's workers reported")
                    .Register(*registry_)),
      reallocations_(prometheus::BuildCounter()
                         .Name("star_job_reallocations_total")
                         .Help("Resource reallocation plans by outcome")
                         .Register(*registry_)),
      cpu_allocation_(prometheus::BuildGauge()
                          .Name("star_job_cpu_allocation")
                          .Help("CPU millicores the job's reallocation plan gives the pod")
                          .Register(*registry_)),
      bandwidth_allocation_(prometheus::BuildGauge()
                                .Name("star_job_bandwidth_allocation_bits_per_second")
                                .Help("Bandwidth the job's reallocation plan gives the pod (pods it limits)")
                                .Register(*registry_)) {
  for (const char* r : {"success", "error", "requeue"}) reconcile_total_.Add({{"result", r}});
}

void OperatorMetrics::Reconciled(const std::string& result, double seconds) {
  std::lock_guard lock(mu_);
  reconcile_total_.Add({{"result", result}}).Increment();
  reconcile_seconds_.Observe(seconds);
}

void OperatorMetrics::DecisionLatency(double seconds) {
  std::lock_guard lock(mu_);
  decision_latency_.Observe(seconds);
}

void OperatorMetrics::Decisions(const std::string& job, const std::set<std::string>& kinds) {
  std::lock_guard lock(mu_);
  for (const std::string& kind : kinds) decisions_.Add(JobLabels(job, {{"kind", kind}})).Increment();
}

void OperatorMetrics::Report(const std::string& job) {
  std::lock_guard lock(mu_);
  reports_.Add(JobLabels(job)).Increment();
}

void OperatorMetrics::Reallocation(const std::string& job, const std::string& outcome) {
  std::lock_guard lock(mu_);
  reallocations_.Add(JobLabels(job, {{"outcome", outcome}})).Increment();
}

void OperatorMetrics::JobState(const std::string& job, std::optional<api::SyncMode> mode,
                               int stragglers) {
  std::lock_guard lock(mu_);
  for (api::SyncMode m : kModes) {
    sync_mode_.Add(JobLabels(job, {{"mode", std::string(api::ToString(m))}}))
        .Set(mode && *mode == m ? 1 : 0);
  }
  stragglers_.Add(JobLabels(job)).Set(stragglers);
  for (const char* kind : kDecisionKinds) decisions_.Add(JobLabels(job, {{"kind", kind}}));
}

void OperatorMetrics::WorkerStragglers(const std::string& job,
                                       const std::vector<api::StragglerStatus>& flagged) {
  std::lock_guard lock(mu_);
  std::set<prometheus::Gauge*>& series = series_[job].straggler;
  for (prometheus::Gauge* g : series) g->Set(0);
  for (const api::StragglerStatus& s : flagged) {
    prometheus::Gauge& g = worker_straggler_.Add(
        JobLabels(job, {{"worker", std::to_string(s.worker)},
                        {"node", s.node},
                        {"cause", std::string(api::ToString(s.cause))},
                        {"kind", std::string(api::ToString(s.kind))}}));
    g.Set(1);
    series.insert(&g);
  }
}

void OperatorMetrics::EstimatedTta(const std::string& job, std::optional<double> seconds) {
  std::lock_guard lock(mu_);
  prometheus::Gauge& g = tta_.Add(JobLabels(job));
  if (seconds) {
    g.Set(*seconds);
  } else {
    tta_.Remove(&g);
  }
}

void OperatorMetrics::Accuracy(const std::string& job, std::optional<double> accuracy) {
  std::lock_guard lock(mu_);
  prometheus::Gauge& g = accuracy_.Add(JobLabels(job));
  if (accuracy) {
    g.Set(*accuracy);
  } else {
    accuracy_.Remove(&g);
  }
}

void OperatorMetrics::PlannedAllocations(const std::string& job, const std::vector<PlannedPod>& pods) {
  std::lock_guard lock(mu_);
  JobSeries& series = series_[job];
  for (prometheus::Gauge* g : series.cpu) cpu_allocation_.Remove(g);
  for (prometheus::Gauge* g : series.bandwidth) bandwidth_allocation_.Remove(g);
  series.cpu.clear();
  series.bandwidth.clear();
  for (const PlannedPod& p : pods) {
    const prometheus::Labels labels = JobLabels(job, {{"pod", p.pod}, {"node", p.node}});
    prometheus::Gauge& g = cpu_allocation_.Add(labels);
    g.Set(static_cast<double>(p.millicores));
    series.cpu.push_back(&g);
    if (p.bits_per_second <= 0) continue;
    prometheus::Gauge& b = bandwidth_allocation_.Add(labels);
    b.Set(static_cast<double>(p.bits_per_second));
    series.bandwidth.push_back(&b);
  }
}

void OperatorMetrics::ForgetJob(const std::string& job) {
  std::lock_guard lock(mu_);
  for (api::SyncMode m : kModes) {
    auto& g = sync_mode_.Add(JobLabels(job, {{"mode", std::string(api::ToString(m))}}));
    sync_mode_.Remove(&g);
  }
  stragglers_.Remove(&stragglers_.Add(JobLabels(job)));
  for (const char* kind : kDecisionKinds) decisions_.Remove(&decisions_.Add(JobLabels(job, {{"kind", kind}})));
  reports_.Remove(&reports_.Add(JobLabels(job)));
  tta_.Remove(&tta_.Add(JobLabels(job)));
  accuracy_.Remove(&accuracy_.Add(JobLabels(job)));
  for (const char* o : kReallocationOutcomes) {
    reallocations_.Remove(&reallocations_.Add(JobLabels(job, {{"outcome", o}})));
  }
  auto it = series_.find(job);
  if (it == series_.end()) return;
  for (prometheus::Gauge* g : it->second.straggler) worker_straggler_.Remove(g);
  for (prometheus::Gauge* g : it->second.cpu) cpu_allocation_.Remove(g);
  for (prometheus::Gauge* g : it->second.bandwidth) bandwidth_allocation_.Remove(g);
  series_.erase(it);
}

std::string OperatorMetrics::Serialize() const {
  std::lock_guard lock(mu_);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace star::op
