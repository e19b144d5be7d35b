// OperatorMetrics: the operator's Prometheus metrics (the model; star-operator serves
// them on --metrics-listen /metrics). Thread-safe.
//
//   star_operator_reconcile_total{result}        reconciles (of TrainingJobs and of
//                                                NodeAllocations) by result: success,
//                                                error, requeue (all initialised to zero)
//   star_operator_reconcile_duration_seconds     duration of one reconcile
//   star_job_sync_mode{job,mode}                 1 for the job's mode in force, else 0
//   star_job_stragglers{job}                     current stragglers
//   star_job_decisions_total{job}                decisions issued by the job's loop
//   star_job_reports_total{job}                  worker reports the endpoint accepted
//   star_job_decision_latency_seconds            time the control loop took on a report
//                                                that produced a new decision
//   star_job_reallocations_total{job,outcome}    resource reallocation plans by outcome:
//                                                applied, skipped, error
// job = "<namespace>/<name>". A deleted job's series are removed (ForgetJob).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "star/core/api/types.h"

namespace star::op {

class OperatorMetrics {
 public:
  OperatorMetrics();
  // result: "success", "error" or "requeue".
  void Reconciled(const std::string& result, double seconds);
  void Decision(const std::string& job, double latency_seconds);
  void Report(const std::string& job);
  void JobState(const std::string& job, std::optional<api::SyncMode> mode, int stragglers);
  // outcome: "applied", "skipped" or "error".
  void Reallocation(const std::string& job, const std::string& outcome);
  void ForgetJob(const std::string& job);
  // The text exposition format.
  std::string Serialize() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& reconcile_total_;
  prometheus::Histogram& reconcile_seconds_;
  prometheus::Family<prometheus::Gauge>& sync_mode_;
  prometheus::Family<prometheus::Gauge>& stragglers_;
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Family<prometheus::Counter>& reports_;
  prometheus::Histogram& decision_latency_;
  prometheus::Family<prometheus::Counter>& reallocations_;
};

}  // namespace star::op
