// StatusWriter: brings what the reports made of each job to its status, at most once per
// job per interval (JobRegistry::Drain), with a Kubernetes Event per loop event
// (straggler, mode, AMP, batches, target reached); a loop event that may call for a reallocation queues
// the job. Nudge() brings the next round forward (a straggler, a recovery or a change of
// resource needs should not wait for the interval), to no sooner than kNudgeGap after the
// last round, so that a flapping worker cannot turn it into a stream of writes.
// Part of the TrainingJob controller; a Runnable of the Manager.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "star/operator/reconciler/controller.h"
#include "star/operator/reconciler/event_recorder.h"
#include "star/operator/reconciler/job_registry.h"
#include "star/operator/reconciler/manager.h"
#include "star/operator/reconciler/status_records.h"

namespace star::op {

// The kinds (kDecisionKinds) of each decision whose changes `events` hold, in order: a
// decision's changes are consecutive loop events at one time, in the order mode, amp_on /
// amp_off, batches (one entry per decision).
std::vector<std::set<std::string>> DecisionKinds(const std::vector<TimelineEvent>& events);

// A drained job's metrics: sync mode, stragglers (per worker too), the estimated TTA, the
// accuracy and the decisions among its new loop events.
void RecordJobMetrics(OperatorMetrics* metrics, const JobUpdate& u);

class StatusWriter : public Runnable {
 public:
  // Every pointer must outlive it; `interval` > 0.
  StatusWriter(Manager* manager, JobRegistry* registry, StatusRecords* records, EventRecorder* events,
               std::chrono::milliseconds interval)
      : manager_(manager), registry_(registry), records_(records), events_(events), interval_(interval) {}
  ~StatusWriter() override { Stop(); }

  [[nodiscard]] Status Start() override;  // starts the writer thread
  void Stop() override;                   // wakes and joins it; idempotent

  void WriteOnce();  // one round: every job with reports since the last round
  void Nudge();      // the next round now, or kNudgeGap after the last one; thread-safe

  static constexpr std::chrono::milliseconds kNudgeGap{100};

 private:
  void Run();

  Manager* manager_;
  JobRegistry* registry_;
  StatusRecords* records_;
  EventRecorder* events_;
  std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool nudged_ = false;
  std::thread thread_;
};

}  // namespace star::op
