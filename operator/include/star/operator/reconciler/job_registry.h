// JobRegistry: the operator's running jobs as the report endpoint sees them. One
// JobControlLoop per job (the same loop local mode runs), the job's report token, and
// what changed since the status writer last looked.
//
// The reconciler registers a job (Upsert) once its token Secret exists and removes it
// when the job is deleted; the report endpoint calls Token and Observe; the status
// writer calls Drain every --status-interval, and sooner when the urgent listener tells it
// that a straggler, a recovery or a change of resource needs is waiting. Thread-safe:
// the registry's lock only finds a job; each job has a lock of its own for its loop, so
// reports of different jobs never wait on each other.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/decision.h"
#include "star/core/api/training_job.h"
#include "star/core/api/worker_report.h"
#include "star/operator/control_loop.h"
#include "star/operator/reconciler/reallocation.h"
#include "star/core/status.h"

namespace star::op {

// A job's status as the reports made it, ready to merge-patch into status.
struct JobUpdate {
  std::string key;            // "<namespace>/<name>"
  // syncMode, k, groups, stragglers, workers, iteration; accuracy, ttaSeconds and
  // estimatedTTASeconds once the loop has them.
  nlohmann::json status;
  std::vector<TimelineEvent> events;  // new since the last Drain, in order
  int stragglers = 0;
  std::optional<api::SyncMode> mode;
  // The epoch of the decision whose fields `status` holds (0: the baseline, none).
  int64_t decision_epoch = 0;
  // The loop's resource needs changed since the last Drain (its reallocation is due).
  bool needs_changed = false;
  std::optional<double> estimated_tta_seconds;  // JobControlLoop::estimated_tta_seconds
  std::optional<double> accuracy;               // JobControlLoop::accuracy
};

// A worker its job's loop flags, as status records it: its latest straggler event's
// classification and when it started straggling (RFC 3339).
struct TrackedStraggler {
  StragglerFields fields;
  std::string since;
};

// A job as its loop sees it now (for resource reallocation).
struct JobSnapshot {
  int workers = 0;
  api::SyncMode mode = api::SyncMode::kSsgd;
  int64_t epoch = 0;  // the current decision's; 0 before any
  JobLoad load;
  // Which of the job's loops this is: a number the registry gives each loop it makes (a
  // spec change makes a new one, whose needs' revisions start over at 0).
  int64_t loop = 0;
  ResourceNeeds needs;  // the workers that need resources (resource_needs.h)
};

// What one report made of its job (JobRegistry::ObserveReport).
struct Observed {
  // The loop's latest decision (nullopt before any); it may not be recorded yet.
  std::optional<api::Decision> decision;
  // The newest decision status records: the one a worker may be given (nullopt: none).
  std::optional<api::Decision> recorded;
  // `decision` is newer than `recorded`: it waits to be recorded (StatusRecords).
  bool unrecorded = false;
  // This report made the loop issue a new decision.
  bool new_decision = false;
  double latency_seconds = 0;  // how long the loop took
};

class JobRegistry {
 public:
  // `now` gives RFC 3339 wall-clock time (for stragglers[].since). `learned`: the
  // learned selector every job's loop is offered (jobs with selector ML use it; without
  // one their loops record a selector_fallback event); the registry serialises its use.
  explicit JobRegistry(std::function<std::string()> now, LoopOptions options = {},
                       LearnedModel learned = {});
  // Wall-clock time in UTC.
  explicit JobRegistry(LoopOptions options = {}, LearnedModel learned = {});

  // Registers `key` or, when the generation, the spec or the gang's restart count
  // (`restarts`: the job's star.dev/restarts) changed, replaces its loop. A new loop
  // resumes from the decision in force: the replaced loop's (a spec change, or a gang
  // restart: the new workers count iterations from 0 again), else `resume` (the one
  // recorded in status, for a restarted operator); when that does not fit the spec, its
  // epochs still continue. InvalidArgument from JobControlLoop::Create.
  [[nodiscard]] Status Upsert(const std::string& key, int64_t generation,
                              const api::TrainingJobSpec& spec, const std::string& token,
                              const std::optional<api::Decision>& resume = std::nullopt, int restarts = 0);
  // Node of each rank ("" unknown), for stragglers[].node.
  void SetWorkerNodes(const std::string& key, std::vector<std::string> nodes);
  void Remove(const std::string& key);
  bool Contains(const std::string& key) const;
  size_t size() const;

  // The token reports of `key` must carry; nullopt for an unknown job.
  std::optional<std::string> Token(const std::string& key) const;

  // Feeds a report to its job's loop. NotFound for an unknown job; the loop's errors.
  // Holds only that job's lock while its loop runs.
  [[nodiscard]] StatusOr<Observed> ObserveReport(const api::WorkerReport& report);
  // ObserveReport's loop decision. `latency_seconds`, when not null, receives how long the
  // loop took.
  [[nodiscard]] StatusOr<std::optional<api::Decision>> Observe(const api::WorkerReport& report,
                                                               double* latency_seconds = nullptr,
                                                               bool* new_decision = nullptr);

  // Called (outside the registry's lock, on the reporting thread) after a report that
  // made its job's loop flag a straggler, report a recovery or change its resource needs:
  // what the status writer should bring out without waiting for its interval. Set it
  // before reports arrive.
  void SetUrgentListener(std::function<void()> listener);
  // nullopt for an unknown job.
  std::optional<JobSnapshot> Snapshot(const std::string& key) const;
  // The reallocation planned for `snap` gave nothing to its needs' workers
  // (JobControlLoop::NoteUnmetNeeds); ignored when the job's loop has changed since.
  void NoteUnmetNeeds(const std::string& key, const JobSnapshot& snap);

  // The job's current decision when it is not recorded (Recorded) yet: it must be
  // written to status before any worker gets it, so that a restarted operator resumes
  // from it. nullopt when there is none or it is recorded.
  std::optional<api::Decision> Unrecorded(const std::string& key) const;
  // Status now records `d` (of the job's current loop or an earlier one).
  void Recorded(const std::string& key, const api::Decision& d);
  // The newest epoch recorded (0 for none or an unknown job).
  int64_t RecordedEpoch(const std::string& key) const;

  // Jobs with reports since the last Drain.
  std::vector<JobUpdate> Drain();

 private:
  struct Job {
    mutable std::mutex mu;  // guards every field below
    int64_t generation = 0;
    int restarts = 0;
    std::string token;
    api::TrainingJobSpec spec;
    std::unique_ptr<JobControlLoop> loop;
    std::vector<std::string> nodes;
    size_t events_sent = 0;  // timeline entries already drained
    int64_t recorded_epoch = 0;  // the newest decision epoch written to status
    std::optional<api::Decision> recorded;  // that decision, when known
    int64_t iteration = 0;
    int64_t loop_id = 0;          // JobSnapshot::loop
    int64_t needs_drained = 0;    // the needs' revision at the last Drain
    bool dirty = false;
    std::map<int, TrackedStraggler> straggling;  // by worker, from the timeline
  };
  // The job of `key`, or nullptr; the registry's lock only while looking.
  std::shared_ptr<Job> Find(const std::string& key) const;
  // A new loop for `job` (locked) with `spec`, resuming the decision in force.
  Status Replace(Job& job, const api::TrainingJobSpec& spec, const std::optional<api::Decision>& resume);
  static StatusOr<Observed> ObserveLocked(Job& job, const api::WorkerReport& report, bool* urgent);
  JobUpdate Build(const std::string& key, Job& job);

  std::function<std::string()> now_;
  LoopOptions options_;
  LearnedModel learned_;  // its selector behind a lock: loops of different jobs share it
  std::function<void()> on_urgent_;
  mutable std::mutex mu_;  // guards jobs_ and loops_made_ (never held while a job's lock is awaited)
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  int64_t loops_made_ = 0;
};

// The decision a job's status records (decisionEpoch > 0 with syncMode, k, groups,
// workers and a pipeline's schedule); nullopt when it records none or does not parse.
std::optional<api::Decision> DecisionFromStatus(const nlohmann::json& status);
// The keys DecisionStatus writes.
inline constexpr const char* kDecisionStatusKeys[] = {"syncMode", "k", "groups", "workers", "decisionEpoch",
                                                       "decisionApplyAtIteration", "pipeline"};
// The status fields that record `d` (syncMode, k, groups, workers, decisionEpoch,
// decisionApplyAtIteration, and pipeline: its schedule, or null for the static one),
// for a merge patch.
nlohmann::json DecisionStatus(const api::Decision& d);

}  // namespace star::op
