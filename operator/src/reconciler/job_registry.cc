#include "star/operator/reconciler/job_registry.h"

#include <algorithm>
#include <chrono>

#include "reconciler/loop_events.h"
#include "star/core/batch/baseline.h"
#include "star/kube/time.h"

namespace star::op {

using nlohmann::json;

JobRegistry::JobRegistry(std::function<std::string()> now, LoopOptions options, LearnedModel learned)
    : now_(std::move(now)), options_(std::move(options)), learned_(std::move(learned)) {}

JobRegistry::JobRegistry(LoopOptions options, LearnedModel learned)
    : JobRegistry(kube::NowRfc3339, std::move(options), std::move(learned)) {}

std::optional<api::Decision> DecisionFromStatus(const json& status) {
  if (!status.is_object()) return std::nullopt;
  auto st = api::TrainingJobStatusFromJson(status, "status");
  if (!st.ok() || st->decision_epoch.value_or(0) <= 0 || !st->sync_mode) return std::nullopt;
  api::Decision d;
  d.epoch = *st->decision_epoch;
  d.apply_at_iteration = st->decision_apply_at_iteration.value_or(0);
  d.mode = *st->sync_mode;
  d.k = st->k.value_or(1);
  d.groups = st->groups;
  for (size_t i = 0; i < st->workers.size(); ++i) {
    d.workers.push_back({static_cast<int>(i), st->workers[i].amp, st->workers[i].batch});
  }
  return d;
}

json DecisionStatus(const api::Decision& d) {
  api::TrainingJobStatus st;
  st.sync_mode = d.mode;
  st.k = d.k;
  st.groups = d.groups;
  for (const api::WorkerSetting& w : d.workers) {
    if (w.worker >= static_cast<int>(st.workers.size())) st.workers.resize(static_cast<size_t>(w.worker) + 1);
    st.workers[static_cast<size_t>(w.worker)] = {w.batch, w.amp};
  }
  st.decision_epoch = d.epoch;
  st.decision_apply_at_iteration = d.apply_at_iteration;
  const json full = api::ToJson(st);
  json out = json::object();
  for (const char* k : kDecisionStatusKeys) {
    if (full.contains(k)) out[k] = full[k];
  }
  return out;
}

Status JobRegistry::Upsert(const std::string& key, int64_t generation,
                           const api::TrainingJobSpec& spec, const std::string& token,
                           const std::optional<api::Decision>& resume) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(key);
  if (it != jobs_.end() && it->second.generation == generation && it->second.spec == spec) {
    it->second.token = token;
    return Status::Ok();
  }
  STAR_ASSIGN_OR_RETURN(JobControlLoop loop, JobControlLoop::Create(spec, options_, learned_));
  std::optional<api::Decision> in_force = resume;
  if (it != jobs_.end() && it->second.loop->current()) in_force = *it->second.loop->current();
  if (in_force && !loop.Resume(*in_force).ok()) loop.ContinueEpochs(in_force->epoch);
  Job job;
  job.recorded_epoch = in_force ? in_force->epoch : 0;
  job.generation = generation;
  job.token = token;
  job.spec = spec;
  job.loop = std::make_unique<JobControlLoop>(std::move(loop));
  job.loop_id = ++loops_made_;
  if (it != jobs_.end()) job.nodes = std::move(it->second.nodes);
  jobs_[key] = std::move(job);
  return Status::Ok();
}

void JobRegistry::SetWorkerNodes(const std::string& key, std::vector<std::string> nodes) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(key);
  if (it != jobs_.end()) it->second.nodes = std::move(nodes);
}

void JobRegistry::Remove(const std::string& key) {
  std::lock_guard lock(mu_);
  jobs_.erase(key);
}

bool JobRegistry::Contains(const std::string& key) const {
  std::lock_guard lock(mu_);
  return jobs_.count(key) > 0;
}

size_t JobRegistry::size() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

std::optional<std::string> JobRegistry::Token(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.token;
}

StatusOr<std::optional<api::Decision>> JobRegistry::Observe(const api::WorkerReport& report,
                                                            double* latency_seconds,
                                                            bool* new_decision) {
  bool urgent = false;
  auto decision = ObserveLocked(report, latency_seconds, new_decision, &urgent);
  if (urgent && on_urgent_) on_urgent_();
  return decision;
}

void JobRegistry::SetUrgentListener(std::function<void()> listener) { on_urgent_ = std::move(listener); }

namespace {

// Whether the loop's timeline from entry `from` holds a straggler or a recovery.
bool HasStragglerChange(const std::vector<TimelineEvent>& timeline, size_t from) {
  for (size_t i = from; i < timeline.size(); ++i) {
    if (timeline[i].kind == EventKind::kStraggler || timeline[i].kind == EventKind::kRecovered) return true;
  }
  return false;
}

}  // namespace

StatusOr<std::optional<api::Decision>> JobRegistry::ObserveLocked(const api::WorkerReport& report,
                                                                  double* latency_seconds, bool* new_decision,
                                                                  bool* urgent) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(report.job);
  if (it == jobs_.end()) return Status::NotFound("job \"" + report.job + "\": not running here");
  Job& job = it->second;
  const api::Decision* before = job.loop->current();
  const int64_t epoch_before = before ? before->epoch : 0;
  const size_t events_before = job.loop->timeline().size();
  const int64_t needs_before = job.loop->resource_needs().revision;
  const auto start = std::chrono::steady_clock::now();
  auto decision = job.loop->Observe(report);
  if (latency_seconds) {
    *latency_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (!decision.ok()) return decision.status();
  if (new_decision) {
    const api::Decision* after = job.loop->current();
    *new_decision = after && after->epoch != epoch_before;
  }
  *urgent = HasStragglerChange(job.loop->timeline(), events_before) ||
            job.loop->resource_needs().revision != needs_before;
  job.iteration = std::max(job.iteration, report.iteration);
  job.dirty = true;
  return decision;
}

std::optional<JobSnapshot> JobRegistry::Snapshot(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return std::nullopt;
  const Job& job = it->second;
  JobSnapshot s;
  s.workers = job.loop->num_workers();
  if (const api::Decision* d = job.loop->current()) {
    s.mode = d->mode;
    s.epoch = d->epoch;
  }
  s.load.synchronous = s.mode == api::SyncMode::kSsgd;
  s.load.worker_seconds = job.loop->worker_seconds();
  if (const auto& max = job.spec.training.max_iterations; max && *max > 0) {
    s.load.progress = std::min(1.0, static_cast<double>(job.iteration) / static_cast<double>(*max));
  }
  s.loop = job.loop_id;
  s.needs = job.loop->resource_needs();
  return s;
}

std::optional<api::Decision> JobRegistry::Unrecorded(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return std::nullopt;
  const api::Decision* d = it->second.loop->current();
  if (d == nullptr || d->epoch <= it->second.recorded_epoch) return std::nullopt;
  return *d;
}

int64_t JobRegistry::RecordedEpoch(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(key);
  return it == jobs_.end() ? 0 : it->second.recorded_epoch;
}

void JobRegistry::Recorded(const std::string& key, int64_t epoch) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(key);
  if (it != jobs_.end()) it->second.recorded_epoch = std::max(it->second.recorded_epoch, epoch);
}

JobUpdate JobRegistry::Build(const std::string& key, Job& job) {
  JobUpdate u;
  u.key = key;
  const auto& timeline = job.loop->timeline();
  for (size_t i = job.events_sent; i < timeline.size(); ++i) {
    const TimelineEvent& e = timeline[i];
    u.events.push_back(e);
    TrackStragglers(e, &job.straggling, now_);
  }
  job.events_sent = timeline.size();
  u.needs_changed = job.loop->resource_needs().revision != job.needs_drained;
  job.needs_drained = job.loop->resource_needs().revision;

  const int n = job.loop->num_workers();
  api::TrainingJobStatus st;
  st.iteration = job.iteration;
  st.accuracy = job.loop->accuracy();
  st.tta_seconds = job.loop->tta_seconds();
  st.estimated_tta_seconds = job.loop->estimated_tta_seconds();
  const api::Decision* d = job.loop->current();
  if (d == nullptr) {
    // The baseline the pods start with: SSGD, equal batches, AMP off.
    st.sync_mode = api::SyncMode::kSsgd;
    st.k = n;
    for (int64_t b : batch::EqualBatches(job.spec.training.global_batch_size, n)) st.workers.push_back({b, false});
  }
  for (int w : job.loop->stragglers()) {
    auto it = job.straggling.find(w);
    // Every flagged worker had a straggler event; the detector's view is the fallback.
    const detect::WorkerView v = job.loop->straggler_view(w);
    api::StragglerStatus s = StragglerStatusOf(
        w, it != job.straggling.end() ? it->second : TrackedStraggler{{v.cause, v.kind, v.slowdown}, ""});
    if (w < static_cast<int>(job.nodes.size())) s.node = job.nodes[w];
    st.stragglers.push_back(std::move(s));
  }
  json full = api::ToJson(st);
  json status = json::object();
  for (const char* k : {"stragglers", "iteration"}) status[k] = full[k];
  // Set once known; a merge patch leaves the recorded value when absent.
  for (const char* k : {"accuracy", "ttaSeconds", "estimatedTTASeconds"}) {
    if (full.contains(k)) status[k] = full[k];
  }
  if (d == nullptr) {
    for (const char* k : {"syncMode", "k", "groups", "workers"}) status[k] = full[k];
  } else if (d->epoch <= job.recorded_epoch) {
    // A decision not recorded yet is written with its first delivery (Unrecorded), all
    // of its fields at once.
    status.update(DecisionStatus(*d));
    u.decision_epoch = d->epoch;
  }
  u.mode = d ? d->mode : api::SyncMode::kSsgd;
  u.status = std::move(status);
  u.stragglers = static_cast<int>(st.stragglers.size());
  u.estimated_tta_seconds = st.estimated_tta_seconds;
  u.accuracy = st.accuracy;
  return u;
}

std::vector<JobUpdate> JobRegistry::Drain() {
  std::lock_guard lock(mu_);
  std::vector<JobUpdate> out;
  for (auto& [key, job] : jobs_) {
    if (!job.dirty) continue;
    job.dirty = false;
    out.push_back(Build(key, job));
  }
  return out;
}

}  // namespace star::op
