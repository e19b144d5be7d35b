#include "sim/simulator.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "sim/mode_engine.h"
#include "sim/pipeline_run.h"
#include "sim/progress.h"
#include "sim/worker_model.h"
#include "star/operator/control_loop.h"

namespace star::sim {
namespace {

ProgressModel ProgressModelOf(const Scenario& s) {
  ProgressModel m;
  m.noise_scale = s.noise_scale;
  m.min_updates = s.min_updates;
  m.staleness_penalty = s.staleness_penalty;
  m.momentum = s.momentum;
  m.group_replicas = s.group_replicas;
  return m;
}

// Per worker: the iterations since its last report.
struct Pending {
  int steps = 0;
  double compute = 0, communication = 0, wait = 0;
  api::LinkReading link;  // sums over the steps that had one
  int links = 0;
};

class Run {
 public:
  Run(const Scenario& s, const api::TrainingJobSpec& spec, op::JobControlLoop loop,
      const SimOptions& options)
      : s_(s),
        options_(options),
        loop_(std::move(loop)),
        model_(s),
        progress_(ProgressModelOf(s)),
        n_(static_cast<size_t>(s.workers)),
        reports_(n_),
        barrier_wait_(n_, 0),
        last_end_(n_, 0) {
    state_.scenario = &s_;
    state_.model = &model_;
    state_.progress = &progress_;
    state_.architecture = spec.architecture;
    state_.steps.assign(n_, 0);
    state_.iteration.assign(n_, 0);
  }

  StatusOr<SimResult> Go() {
    const double limit = TimeLimitSeconds(s_);
    Setting setting = BaselineSetting(s_.workers, s_.batch_per_worker);
    double start = 0;
    std::vector<IterationDone> done;
    while (true) {
      std::unique_ptr<ModeEngine> engine = MakeEngine(state_, setting, start);
      while (true) {
        const int64_t stop_at =
            pending_ ? pending_->apply_at_iteration : std::numeric_limits<int64_t>::max();
        done.clear();
        if (!engine->Next(stop_at, &done)) break;
        for (const IterationDone& d : done) STAR_RETURN_IF_ERROR(Complete(d));
        if (progress_.reached() || engine->now() > limit) return Result();
      }
      // Every worker stopped at the switch: they wait for the last one, then switch.
      if (!pending_) return Result();  // cannot happen: engines stop only for a decision
      start = *std::max_element(last_end_.begin(), last_end_.end());
      for (size_t w = 0; w < n_; ++w) barrier_wait_[w] = start - last_end_[w];
      state_.TakeUpAllChanges();
      setting.batches = state_.batch;
      setting.amp = state_.amp;
      setting = SettingOf(*pending_, setting, s_.workers);
      sync_ = *pending_;
      progress_.Switch(setting.mode == api::SyncMode::kGroups
                           ? std::span<const std::vector<int>>(setting.groups)
                           : std::span<const std::vector<int>>());
      pending_.reset();
    }
  }

 private:
  Status Complete(const IterationDone& d) {
    const auto w = static_cast<size_t>(d.worker);
    last_end_[w] = d.end;
    if (options_.trace != nullptr) {
      *options_.trace << d.iteration << ',' << d.worker << ',' << d.compute << ','
                      << d.communication << '\n';
    }
    Pending& p = reports_[w];
    ++p.steps;
    p.compute += d.compute;
    p.communication += d.communication;
    p.wait += d.wait + barrier_wait_[w];
    if (d.link) {
      p.link = {d.link->peer, p.link.seconds + d.link->seconds, p.link.bytes + d.link->bytes};
      ++p.links;
    }
    barrier_wait_[w] = 0;
    if (p.steps < s_.report_every) return Status::Ok();

    api::WorkerReport r;
    r.job = "sim";
    r.worker = d.worker;
    r.iteration = d.iteration;
    r.iterations = p.steps;
    r.time_seconds = d.end;
    r.compute_seconds = p.compute / p.steps;
    r.communication_seconds = p.communication / p.steps;
    r.wait_seconds = p.wait / p.steps;
    r.local_batch = static_cast<int>(d.batch);
    r.amp = d.amp;
    if (p.links > 0) r.link = api::LinkReading{p.link.peer, p.link.seconds / p.links, 1};
    r.local_grad_sq_norm = 1 + s_.noise_scale / static_cast<double>(d.batch);
    if (d.update_batch > d.batch) {
      r.global_grad_sq_norm = 1 + s_.noise_scale / static_cast<double>(d.update_batch);
    }
    p = Pending{};
    auto decision = loop_.Observe(r);
    if (!decision.ok()) {
      return Status::Internal("the control loop rejected a simulated report: " +
                              decision.status().message());
    }
    NoteNothingToGive();
    if (*decision && (*decision)->epoch > last_epoch_) {
      last_epoch_ = (*decision)->epoch;
      ++decisions_;
      if (!pending_ && api::SameSynchronization(**decision, sync_)) {
        Hold(**decision);
      } else {
        pending_ = **decision;  // a newer decision replaces a pending one
      }
    }
    return Status::Ok();
  }

  // The simulator moves no resources between jobs: every need the loop lists is unmet,
  // as star local's reallocator says when a worker has no neighbor to take from.
  void NoteNothingToGive() {
    const op::ResourceNeeds& needs = loop_.resource_needs();
    if (needs.revision == noted_revision_) return;
    noted_revision_ = needs.revision;
    std::vector<int> workers;
    for (const op::ResourceNeed& n : needs.workers) workers.push_back(n.worker);
    loop_.NoteUnmetNeeds(needs.revision, workers);
  }

  // A decision of batches or AMP only: no switch; each worker takes its setting up at the
  // decision's iteration (SimState::BeginIteration), as the shim's workers do.
  void Hold(const api::Decision& d) {
    for (const api::WorkerSetting& ws : d.workers) {
      if (ws.worker < 0 || ws.worker >= s_.workers) continue;
      state_.changes[static_cast<size_t>(ws.worker)].push_back(
          {d.apply_at_iteration, std::max<int64_t>(1, ws.batch), static_cast<char>(ws.amp ? 1 : 0)});
    }
  }

  SimResult Result() const {
    SimResult r;
    r.tta_seconds = progress_.tta();
    r.updates = progress_.updates();
    r.iterations = *std::max_element(state_.iteration.begin(), state_.iteration.end());
    r.decisions = decisions_;
    r.timeline = loop_.timeline();
    return r;
  }

  const Scenario& s_;
  const SimOptions& options_;
  op::JobControlLoop loop_;
  WorkerModel model_;
  Progress progress_;
  size_t n_;
  SimState state_;
  std::vector<Pending> reports_;
  std::vector<double> barrier_wait_;  // per worker: waited at the last switch, not reported yet
  std::vector<double> last_end_;      // per worker: when its last iteration ended
  std::optional<api::Decision> pending_;  // a switch: every worker stops at its iteration
  api::Decision sync_;                    // the last switch made (ssgd at the start)
  int64_t last_epoch_ = 0;
  int64_t noted_revision_ = 0;
  int64_t decisions_ = 0;
};

}  // namespace

api::TrainingJobSpec JobSpecOf(const Scenario& s) {
  api::TrainingJobSpec spec;
  spec.architecture = s.architecture;
  spec.workers.replicas = s.workers;
  if (s.architecture == api::Architecture::kParameterServer) {
    api::ReplicaSpec servers;
    servers.replicas = s.parameter_servers;
    spec.parameter_servers = servers;
  }
  spec.training.global_batch_size = static_cast<int64_t>(s.workers) * s.batch_per_worker;
  if (s.pipeline) {
    spec.parallelism = {s.pipeline->stages, s.pipeline->micro_batches, s.pipeline->max_in_flight};
    spec.training.global_batch_size = static_cast<int64_t>(s.workers / s.pipeline->stages) * s.batch_per_worker;
  }
  spec.synchronization.min_k = s.min_k;
  if (s.detection_window) spec.mitigation.detection.window = *s.detection_window;
  return spec;
}

StatusOr<SimResult> Simulate(const Scenario& s, local::Policy policy, const SimOptions& options) {
  api::TrainingJobSpec spec = local::ApplyPolicy(JobSpecOf(s), policy);
  spec.synchronization.selector = options.selector;
  if (!s.amp_available) spec.mitigation.amp.enabled = false;  // as `star local` runs it
  op::LoopOptions lo;
  lo.apply_margin_iterations = 3 * s.report_every;  // as `star local` runs it
  lo.select = options.select;
  op::LearnedModel learned;
  if (options.model) learned.selector = options.model;
  auto loop = op::JobControlLoop::Create(spec, lo, std::move(learned));
  if (!loop.ok()) return loop.status();
  StatusOr<SimResult> result = s.pipeline ? SimulatePipeline(s, std::move(*loop), options)
                                           : Run(s, spec, std::move(*loop), options).Go();
  if (!result.ok()) return result.status();
  result->policy = std::string(local::ToString(policy));
  return result;
}

nlohmann::json ToJson(const SimResult& r) {
  nlohmann::json j = {{"policy", r.policy},
                      {"tta_seconds", nullptr},
                      {"updates", r.updates},
                      {"iterations", r.iterations},
                      {"decisions", r.decisions}};
  if (r.tta_seconds) j["tta_seconds"] = *r.tta_seconds;
  if (r.pipeline) {
    j["static_iteration_seconds"] = r.static_iteration_seconds ? nlohmann::json(*r.static_iteration_seconds) : nullptr;
    j["adapted_iteration_seconds"] =
        r.adapted_iteration_seconds ? nlohmann::json(*r.adapted_iteration_seconds) : nullptr;
  }
  return j;
}

}  // namespace star::sim
