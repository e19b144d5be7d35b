#include "star/operator/reconciler/status_records.h"

#include <algorithm>

#include "reconciler/helpers.h"
#include "star/kube/informer.h"

namespace star::op {

using nlohmann::json;

namespace {

std::pair<std::string, std::string> SplitKey(const std::string& key) {
  const auto slash = key.find('/');
  return {key.substr(0, slash), key.substr(slash + 1)};
}

}  // namespace

std::shared_ptr<std::mutex> StatusRecords::JobLock(const std::string& key) {
  std::lock_guard lock(mu_);
  if (locks_.size() >= prune_at_) {
    // Locks nobody holds (only the map refers to them) belong to no write in flight: drop
    // them, so that deleted jobs' locks do not pile up. Amortised O(1) per call.
    std::erase_if(locks_, [](const auto& entry) { return entry.second.use_count() == 1; });
    prune_at_ = std::max(kMinPruneAt, 2 * locks_.size());
  }
  std::shared_ptr<std::mutex>& m = locks_[key];
  if (!m) m = std::make_shared<std::mutex>();
  return m;
}

Status StatusRecords::RecordDecision(const std::string& key) {
  // Reports without a new decision skip the lock; the newest one is read again under it.
  if (!registry_->Unrecorded(key)) return Status::Ok();
  const std::shared_ptr<std::mutex> job_lock = JobLock(key);
  std::lock_guard lock(*job_lock);
  auto unrecorded = registry_->Unrecorded(key);
  if (!unrecorded) return Status::Ok();
  const auto [ns, name] = SplitKey(key);
  auto r = client_->MergePatch(kube::TrainingJobs(), ns, name, {{"status", DecisionStatus(*unrecorded)}},
                               /*status=*/true);
  if (!r.ok()) {
    return Status(r.status().code(), "decision epoch " + std::to_string(unrecorded->epoch) +
                                         " not recorded: " + r.status().ToString());
  }
  registry_->Recorded(key, *unrecorded);
  return Status::Ok();
}

void StatusRecords::WriteReported(JobUpdate u) {
  const std::shared_ptr<std::mutex> job_lock = JobLock(u.key);
  std::lock_guard lock(*job_lock);
  // A decision recorded since Drain is newer than what `u` holds: its fields stay.
  if (registry_->RecordedEpoch(u.key) != u.decision_epoch) {
    for (const char* k : kDecisionStatusKeys) u.status.erase(k);
  }
  const auto [ns, name] = SplitKey(u.key);
  auto r = client_->MergePatch(kube::TrainingJobs(), ns, name, {{"status", u.status}}, true);
  if (!r.ok()) Log("status of " + u.key + ": " + r.status().ToString());
}

Status StatusRecords::WritePhase(const json& job, json patch) {
  const json old_status = job.value("status", json::object());
  // Not interleaved with decision records: the baseline must not replace a decision
  // recorded since `job` was read.
  const std::shared_ptr<std::mutex> job_lock = JobLock(kube::KeyOf(job));
  std::lock_guard lock(*job_lock);
  if (!old_status.contains("syncMode") && registry_->RecordedEpoch(kube::KeyOf(job)) == 0) {
    // The mode the pods start in, until a report says more (kubectl get tj: MODE).
    patch["status"]["syncMode"] = "ssgd";
    // k is every worker process: replicas * procsPerPod.
    const json workers = job.value("spec", json::object()).value("workers", json::object());
    const json replicas = workers.value("replicas", json()), procs = workers.value("procsPerPod", json(1));
    if (replicas.is_number_integer() && replicas.get<int64_t>() >= 1 && procs.is_number_integer() &&
        procs.get<int64_t>() >= 1) {
      patch["status"]["k"] = replicas.get<int64_t>() * procs.get<int64_t>();
    }
  }
  return client_->MergePatch(kube::TrainingJobs(), job["metadata"].value("namespace", "default"),
                             job["metadata"]["name"].get<std::string>(), patch, /*status=*/true)
      .status();
}

}  // namespace star::op
