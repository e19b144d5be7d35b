#include "star/operator/reconciler/job_registry.h"

#include <algorithm>
#include <chrono>

#include "reconciler/loop_events.h"
#include "star/core/batch/baseline.h"
#include "star/kube/time.h"

namespace star::op {

using nlohmann::json;

namespace {

// One learned selector shared by the loops of every job, whose reports run in parallel:
// one call at a time (LearnedModel: the model need not be thread-safe).
class LockedSelector final : public select::LearnedSelector {
 public:
  explicit LockedSelector(std::shared_ptr<select::LearnedSelector> model) : model_(std::move(model)) {}
  StatusOr<std::vector<float>> Scores(const select::SelectorFeatures& features) override {
    std::lock_guard lock(mu_);
    return model_->Scores(features);
  }

 private:
  std::mutex mu_;
  std::shared_ptr<select::LearnedSelector> model_;
};

LearnedModel Locked(LearnedModel learned) {
  if (learned.selector) learned.selector = std::make_shared<LockedSelector>(std::move(learned.selector));
  return learned;
}

}  // namespace

JobRegistry::JobRegistry(std::function<std::string()> now, LoopOptions options, LearnedModel learned)
    : now_(std::move(now)), options_(std::move(options)), learned_(Locked(std::move(learned))) {}

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
  if (st->pipeline) {
    d.warmup = st->pipeline->warmup;
    d.predicted_iteration_seconds = st->pipeline->predicted_iteration_seconds;
    d.slow_link = st->pipeline->slow_link;
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
  if (!d.warmup.empty()) st.pipeline = {d.warmup, d.predicted_iteration_seconds, d.slow_link};
  const json full = api::ToJson(st);
  json out = json::object();
  for (const char* k : kDecisionStatusKeys) {
    if (full.contains(k)) out[k] = full[k];
  }
  // A merge patch's null removes a schedule an earlier decision recorded.
  if (!st.pipeline) out["pipeline"] = nullptr;
  return out;
}

std::shared_ptr<JobRegistry::Job> JobRegistry::Find(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(key);
  return it == jobs_.end() ? nullptr : it->second;
}

Status JobRegistry::Upsert(const std::string& key, int64_t generation, const api::TrainingJobSpec& spec,
                           const std::string& token, const std::optional<api::Decision>& resume, int restarts) {
  std::shared_ptr<Job> job = Find(key);
  const bool known = job != nullptr;
  if (!known) {
    job = std::make_shared<Job>();
    job->recorded_epoch = resume ? resume->epoch : 0;
    job->recorded = resume;
  }
  {
    std::lock_guard lock(job->mu);
    if (known && job->generation == generation && job->spec == spec && job->restarts == restarts) {
      job->token = token;
      return Status::Ok();
    }
    STAR_RETURN_IF_ERROR(Replace(*job, spec, resume));
    job->generation = generation;
    job->restarts = restarts;
    job->token = token;
  }
  std::lock_guard lock(mu_);
  job->loop_id = ++loops_made_;  // only read under the registry's lock as well (Snapshot)
  jobs_[key] = std::move(job);
  return Status::Ok();
}

Status JobRegistry::Replace(Job& job, const api::TrainingJobSpec& spec, const std::optional<api::Decision>& resume) {
  STAR_ASSIGN_OR_RETURN(JobControlLoop loop, JobControlLoop::Create(spec, options_, learned_));
  std::optional<api::Decision> in_force = resume;
  if (job.loop && job.loop->current()) in_force = *job.loop->current();
  if (in_force && !loop.Resume(*in_force).ok()) loop.ContinueEpochs(in_force->epoch);
  job.spec = spec;
  job.loop = std::make_unique<JobControlLoop>(std::move(loop));
  // The new loop's timeline, needs and iterations start over.
  job.events_sent = 0;
  job.needs_drained = 0;
  job.iteration = 0;
  job.straggling.clear();
  return Status::Ok();
}

void JobRegistry::SetWorkerNodes(const std::string& key, std::vector<std::string> nodes) {
  if (std::shared_ptr<Job> job = Find(key)) {
    std::lock_guard lock(job->mu);
    job->nodes = std::move(nodes);
  }
}

void JobRegistry::Remove(const std::string& key) {
  std::lock_guard lock(mu_);
  jobs_.erase(key);
}

bool JobRegistry::Contains(const std::string& key) const { return Find(key) != nullptr; }

size_t JobRegistry::size() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

std::optional<std::string> JobRegistry::Token(const std::string& key) const {
  std::shared_ptr<Job> job = Find(key);
  if (!job) return std::nullopt;
  std::lock_guard lock(job->mu);
  return job->token;
}

StatusOr<Observed> JobRegistry::ObserveReport(const api::WorkerReport& report) {
  std::shared_ptr<Job> job = Find(report.job);
  if (!job) return Status::NotFound("job \"" + report.job + "\": not running here");
  bool urgent = false;
  StatusOr<Observed> observed = [&] {
    std::lock_guard lock(job->mu);
    return ObserveLocked(*job, report, &urgent);
  }();
  if (urgent && on_urgent_) on_urgent_();
  return observed;
}

StatusOr<std::optional<api::Decision>> JobRegistry::Observe(const api::WorkerReport& report,
                                                            double* latency_seconds,
                                                            bool* new_decision) {
  STAR_ASSIGN_OR_RETURN(Observed o, ObserveReport(report));
  if (latency_seconds) *latency_seconds = o.latency_seconds;
  if (new_decision) *new_decision = o.new_decision;
  return o.decision;
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

StatusOr<Observed> JobRegistry::ObserveLocked(Job& job, const api::WorkerReport& report, bool* urgent) {
  const api::Decision* before = job.loop->current();
  const int64_t epoch_before = before ? before->epoch : 0;
  const size_t events_before = job.loop->timeline().size();
  const int64_t needs_before = job.loop->resource_needs().revision;
  const auto start = std::chrono::steady_clock::now();
  auto decision = job.loop->Observe(report);
  Observed o;
  o.latency_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!decision.ok()) return decision.status();
  o.decision = *decision;
  const api::Decision* after = job.loop->current();
  o.new_decision = after && after->epoch != epoch_before;
  o.unrecorded = after && after->epoch > job.recorded_epoch;
  o.recorded = o.unrecorded ? job.recorded : o.decision;
  *urgent = HasStragglerChange(job.loop->timeline(), events_before) ||
            job.loop->resource_needs().revision != needs_before;
  job.iteration = std::max(job.iteration, report.iteration);
  job.dirty = true;
  return o;
}

void JobRegistry::NoteUnmetNeeds(const std::string& key, const JobSnapshot& snap) {
  std::shared_ptr<Job> found = Find(key);
  if (!found) return;
  std::lock_guard lock(found->mu);
  {
    std::lock_guard registry_lock(mu_);
    if (found->loop_id != snap.loop) return;
  }
  std::vector<int> workers;
  for (const ResourceNeed& n : snap.needs.workers) workers.push_back(n.worker);
  found->loop->NoteUnmetNeeds(snap.needs.revision, workers);
}

std::optional<JobSnapshot> JobRegistry::Snapshot(const std::string& key) const {
  std::shared_ptr<Job> found = Find(key);
  if (!found) return std::nullopt;
  std::lock_guard lock(found->mu);
  const Job& job = *found;
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
  {
    std::lock_guard registry_lock(mu_);
    s.loop = job.loop_id;
  }
  s.needs = job.loop->resource_needs();
  return s;
}

std::optional<api::Decision> JobRegistry::Unrecorded(const std::string& key) const {
  std::shared_ptr<Job> job = Find(key);
  if (!job) return std::nullopt;
  std::lock_guard lock(job->mu);
  const api::Decision* d = job->loop->current();
  if (d == nullptr || d->epoch <= job->recorded_epoch) return std::nullopt;
  return *d;
}

int64_t JobRegistry::RecordedEpoch(const std::string& key) const {
  std::shared_ptr<Job> job = Find(key);
  if (!job) return 0;
  std::lock_guard lock(job->mu);
  return job->recorded_epoch;
}

void JobRegistry::Recorded(const std::string& key, const api::Decision& d) {
  std::shared_ptr<Job> job = Find(key);
  if (!job) return;
  std::lock_guard lock(job->mu);
  if (d.epoch <= job->recorded_epoch) return;
  job->recorded_epoch = d.epoch;
  job->recorded = d;
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
  std::vector<std::pair<std::string, std::shared_ptr<Job>>> jobs;
  {
    std::lock_guard lock(mu_);
    jobs.assign(jobs_.begin(), jobs_.end());
  }
  std::vector<JobUpdate> out;
  for (auto& [key, job] : jobs) {
    std::lock_guard lock(job->mu);
    if (!job->dirty) continue;
    job->dirty = false;
    out.push_back(Build(key, *job));
  }
  return out;
}

}  // namespace star::op
