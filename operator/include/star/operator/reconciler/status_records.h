// StatusRecords: every write of a TrainingJob's status that may touch its decision
// fields goes through here, one at a time per job, so that status never goes back to an
// older decision: the decision records (DecisionRecorder, for the report endpoint), the
// status writer's report summaries and the job reconciler's phase writes. Writes of
// different jobs do not wait on each other.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "star/core/status.h"
#include "star/kube/client.h"
#include "star/operator/reconciler/job_registry.h"

namespace star::op {

class StatusRecords {
 public:
  // `client` and `registry` must outlive it.
  StatusRecords(kube::Client* client, JobRegistry* registry) : client_(client), registry_(registry) {}

  // Writes job `key`'s current decision to status when it is not recorded yet (a
  // decision reaches the workers only once status holds it: a restarted operator resumes
  // from there). The client's error when the write fails. Thread-safe; blocks for as long
  // as the API request takes (call it off the report listener's threads).
  [[nodiscard]] Status RecordDecision(const std::string& key);
  // Merge-patches `u.status` into its job's status; the decision fields are left out
  // when a newer decision was recorded since `u` was drained. Errors are logged.
  void WriteReported(JobUpdate u);
  // Merge-patches `patch` (a {"status": {...}} object) into `job`'s status; adds the
  // starting mode (syncMode ssgd, k = workers) while status has no mode and no decision
  // was recorded. The client's error.
  [[nodiscard]] Status WritePhase(const nlohmann::json& job, nlohmann::json patch);

 private:
  // The lock that keeps `key`'s writes one at a time.
  std::shared_ptr<std::mutex> JobLock(const std::string& key);

  kube::Client* client_;
  JobRegistry* registry_;
  static constexpr size_t kMinPruneAt = 64;
  std::mutex mu_;  // guards locks_ and prune_at_
  std::map<std::string, std::shared_ptr<std::mutex>> locks_;  // by job key
  size_t prune_at_ = kMinPruneAt;  // JobLock drops idle locks once locks_ reaches this size
};

}  // namespace star::op
