// OperatorMetrics: the operator's Prometheus metrics (the model; star-operator serves
// them on --metrics-listen /metrics). Thread-safe.
//
//   star_operator_reconcile_total{result}        reconciles (of TrainingJobs and of
//                                                NodeAllocations) by result: success,
//                                                error, requeue (all initialised to zero)
//   star_operator_reconcile_duration_seconds     duration of one reconcile
//   star_job_sync_mode{J,mode}                   1 for the job's mode in force, else 0
//   star_job_stragglers{J}                       current stragglers
//   star_job_worker_straggler{J,worker,node,cause,kind}
//                                                1 while the job's loop flags the worker
//                                                on that node (the pod's node, as
//                                                status.stragglers[] has it; "" when
//                                                unknown) with that classification (cause
//                                                compute|communication, kind dynamic|
//                                                static), 0 once it recovered or was
//                                                reclassified
//   star_job_decisions_total{J,kind}             decisions issued by the job's loop, one
//                                                increment per kind of change a decision
//                                                makes: sync_mode (mode, k or groups),
//                                                amp (a worker's AMP on or off), batch
//                                                (local batches); each initialised to zero
//   star_job_reports_total{J}                    worker reports the endpoint accepted
//   star_job_decision_latency_seconds            time the control loop took on a report
//                                                that produced a new decision
//   star_job_estimated_tta_seconds{J}            JobControlLoop::estimated_tta_seconds:
//                                                the time to accuracy once the workers'
//                                                reports reached the target; before that
//                                                the job time at which spec.training.
//                                                maxIterations is reached at the rate so
//                                                far (jobs with a targetAccuracy and
//                                                maxIterations, once a report has come in)
//   star_job_accuracy{J}                         JobControlLoop::accuracy: the latest test
//                                                accuracy the job's workers reported;
//                                                absent before any
//   star_job_reallocations_total{J,outcome}      resource reallocation plans by outcome:
//                                                applied, skipped, error, undone
//   star_job_cpu_allocation{J,pod,node}          CPU millicores the job's applied
//                                                reallocation plan gives a pod in its
//                                                node's NodeAllocation (the pods whose
//                                                allocation the plan changes, other jobs'
//                                                included); gone when the plan is undone
//                                                or replaced
// J = the labels namespace and trainingjob: the TrainingJob's namespace and name (not
// `job`, which is Prometheus's own target label). pod = "<namespace>/<name>". The methods
// take the job as "<namespace>/<name>". A deleted job's series are removed (ForgetJob).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "star/core/api/training_job.h"
#include "star/core/api/types.h"

namespace star::op {

// The values of star_job_decisions_total's kind label.
inline constexpr const char* kDecisionKinds[] = {"sync_mode", "amp", "batch"};

// `more` with the labels of job "<namespace>/<name>": namespace and trainingjob (a job
// without "/": trainingjob only).
prometheus::Labels JobLabels(const std::string& job, prometheus::Labels more = {});

// A pod's allocation in a reallocation plan (star_job_cpu_allocation, and
// star_job_bandwidth_allocation_bits_per_second when the plan limits its bandwidth).
struct PlannedPod {
  std::string pod;   // "<namespace>/<name>"
  std::string node;
  int64_t millicores = 0;
  int64_t bits_per_second = 0;  // 0: the plan leaves its bandwidth alone
};

class OperatorMetrics {
 public:
  OperatorMetrics();
  // result: "success", "error" or "requeue".
  void Reconciled(const std::string& result, double seconds);
  // The latency of the loop on a report that produced a new decision (the decision's
  // kinds are counted by Decisions).
  void DecisionLatency(double seconds);
  // One decision of `job` with the given kinds (each one of kDecisionKinds).
  void Decisions(const std::string& job, const std::set<std::string>& kinds);
  void Report(const std::string& job);
  void JobState(const std::string& job, std::optional<api::SyncMode> mode, int stragglers);
  // The workers the job's loop flags now (level-based): theirs set to 1, every other
  // star_job_worker_straggler series of the job to 0.
  void WorkerStragglers(const std::string& job, const std::vector<api::StragglerStatus>& flagged);
  // Sets star_job_estimated_tta_seconds; nullopt removes it.
  void EstimatedTta(const std::string& job, std::optional<double> seconds);
  // Sets star_job_accuracy; nullopt removes it.
  void Accuracy(const std::string& job, std::optional<double> accuracy);
  // outcome: "applied", "skipped", "error" or "undone".
  void Reallocation(const std::string& job, const std::string& outcome);
  // Replaces the job's star_job_cpu_allocation and
  // star_job_bandwidth_allocation_bits_per_second series by `pods` (empty: none).
  void PlannedAllocations(const std::string& job, const std::vector<PlannedPod>& pods);
  void ForgetJob(const std::string& job);
  // The text exposition format.
  std::string Serialize() const;

 private:
  // Series of one job that are not one per fixed label value.
  struct JobSeries {
    std::set<prometheus::Gauge*> straggler;
    std::vector<prometheus::Gauge*> cpu;
    std::vector<prometheus::Gauge*> bandwidth;
  };

  mutable std::mutex mu_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& reconcile_total_;
  prometheus::Histogram& reconcile_seconds_;
  prometheus::Family<prometheus::Gauge>& sync_mode_;
  prometheus::Family<prometheus::Gauge>& stragglers_;
  prometheus::Family<prometheus::Gauge>& worker_straggler_;
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Family<prometheus::Counter>& reports_;
  prometheus::Histogram& decision_latency_;
  prometheus::Family<prometheus::Gauge>& tta_;
  prometheus::Family<prometheus::Gauge>& accuracy_;
  prometheus::Family<prometheus::Counter>& reallocations_;
  prometheus::Family<prometheus::Gauge>& cpu_allocation_;
  prometheus::Family<prometheus::Gauge>& bandwidth_allocation_;
  std::map<std::string, JobSeries> series_;  // by job
};

}  // namespace star::op
