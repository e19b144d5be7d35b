// TrainingJobReconciler: the TrainingJob controller's Reconcile(key), key
// "<namespace>/<name>". Level-based: it re-reads the job and its pods from the caches,
// computes what should exist (job_objects.h) and applies it idempotently:
//   finalizer star.dev/node-allocations on the job; token Secret (used only when the
//   job controls it: a Secret of that name it does not control fails the job with
//   reason SecretNameTaken and is left as it is); headless Service;
//   pods (all desired pods are created together; AlreadyExists is fine; a pod the API
//   refuses for good rolls the created ones back and fails the job: all or none);
//   the job's pods are those it controls (ownerReference uid): a pod that only carries
//   the star.dev/job label is never deleted, counted or a cause of a restart;
//   phase and conditions (DecidePhase), gang restarts with backoff (annotation
//   star.dev/restarts); the job's reallocation plan (kept in the NodeAllocations,
//   reallocator.h); what the job wants in each NodeAllocation (its pods per node, handed
//   to the NodeAllocation reconciler); on deletion the job's entries leave every
//   NodeAllocation, then the finalizer goes. A job that no longer exists leaves the
//   registry and every NodeAllocation.
// Transient errors requeue with backoff (the Manager); terminal errors (an invalid spec,
// a pod the API refuses) are written to status (phase Failed, condition Failed with the
// reason) and not retried. It registers the job in the JobRegistry the report endpoint
// reads. Its status writer (status_writer.h) is a separate Runnable.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/training_job.h"
#include "star/core/status.h"
#include "star/operator/reconciler/controller.h"
#include "star/operator/reconciler/event_recorder.h"
#include "star/operator/reconciler/job_objects.h"
#include "star/operator/reconciler/job_registry.h"
#include "star/operator/reconciler/manager.h"
#include "star/operator/reconciler/node_allocation_reconciler.h"
#include "star/operator/reconciler/report_endpoint.h"
#include "star/operator/reconciler/status_records.h"

namespace star::op {

class Reallocator;

struct TrainingJobOptions {
  int max_restarts = 3;  // pod-failure restarts before the job fails; default 3
  // First restart backoff; doubles per restart up to 5 min. Default 1 s.
  std::chrono::milliseconds restart_backoff{1000};
};

// What the reconciler works with; every pointer must outlive it.
struct TrainingJobDeps {
  JobRegistry* registry = nullptr;
  StatusRecords* records = nullptr;
  EventRecorder* events = nullptr;
  NodeAllocationReconciler* nodes = nullptr;
  const ReportEndpoint* endpoint = nullptr;  // its url() is STAR_CONTROLLER_URL
};

class TrainingJobReconciler : public Reconciler {
 public:
  // Adds its handlers (TrainingJobs, their pods and Services) to `manager`'s cache and
  // registers itself for the keys Owns accepts; call before the Manager starts.
  // InvalidArgument naming a bad option or a missing dependency.
  static StatusOr<std::unique_ptr<TrainingJobReconciler>> Create(Manager* manager, TrainingJobOptions options,
                                                                 TrainingJobDeps deps);
  ~TrainingJobReconciler() override;

  static bool Owns(const std::string& key);  // every key but a NodeAllocation's

  StatusOr<std::chrono::milliseconds> Reconcile(const std::string& key) override;

 private:
  TrainingJobReconciler(Manager* manager, TrainingJobOptions options, TrainingJobDeps deps);
  void Watch();
  void OnJob(const std::string& type, const nlohmann::json& job);
  void OnPod(const std::string& type, const nlohmann::json& pod);

  StatusOr<std::chrono::milliseconds> Gone(const std::string& key);
  StatusOr<std::chrono::milliseconds> Deleting(const nlohmann::json& job, const std::string& key);
  StatusOr<std::chrono::milliseconds> Finalize(const nlohmann::json& job);
  Status EnsureFinalizer(nlohmann::json* job);
  StatusOr<std::string> EnsureToken(const nlohmann::json& job);
  Status SecretNameTaken(const nlohmann::json& job);
  Status EnsureService(const nlohmann::json& job);

  StatusOr<std::chrono::milliseconds> Converge(nlohmann::json* job, const std::string& key,
                                               const api::TrainingJobSpec& spec,
                                               const std::vector<nlohmann::json>& desired, const std::string& token);
  PhaseInput Observe(const nlohmann::json& job, const std::string& key, const api::TrainingJobSpec& spec,
                     const std::vector<nlohmann::json>& desired, std::chrono::milliseconds* wait);
  StatusOr<bool> ExpireFinished(const nlohmann::json& job, const api::TrainingJobSpec& spec,
                                std::chrono::milliseconds* wait);
  std::map<std::string, nlohmann::json> ObservedPods(const std::string& key, const std::string& job_uid);
  Status RecordRestart(nlohmann::json* job, const std::string& key, int restarts, std::chrono::milliseconds* wait);
  Status DeletePods(const nlohmann::json& job, const PhaseInput& in, const PhaseDecision& d);
  StatusOr<bool> CreatePods(const nlohmann::json& job, const PhaseInput& in, const PhaseDecision& d,
                            const std::vector<nlohmann::json>& desired, const std::string& token);
  Status WritePhase(const nlohmann::json& job, const PhaseDecision& d);
  Status Fail(const nlohmann::json& job, const std::string& reason, const std::string& message);

  Manager* manager_;
  kube::Client* client_;
  TrainingJobOptions options_;
  TrainingJobDeps deps_;
  std::unique_ptr<Reallocator> reallocator_;
  std::mutex mu_;  // guards the maps below
  std::map<std::string, std::set<std::string>> job_pods_;  // job key -> pod names (the pods informer)
  std::set<std::string> seen_;  // jobs whose stored reallocation plan was read back
  std::map<std::string, std::chrono::steady_clock::time_point> restarted_at_;  // job key -> last restart
};

}  // namespace star::op
