// The control loop's pipeline schedule (ALGORITHMS.md section 7, Adaptra): warm-up
// depths the pipeline model chooses from the stages' reported costs, adopted when they
// pay and dropped when the slow link recovers (control_loop.h, "Pipelines").
#include <algorithm>
#include <utility>

#include "star/core/api/parallelism.h"
#include "star/operator/control_loop.h"

namespace star::op {
namespace {

// The link (i joins stage i and i + 1) with the longest round trip per micro-batch.
int SlowestLink(const pipeline::PipelineCosts& c) {
  int slowest = -1;
  double worst = -1;
  for (size_t i = 0; i < c.links.size(); ++i) {
    const double trip = pipeline::RoundTripSeconds(c.links[i]);
    if (trip > worst) slowest = static_cast<int>(i), worst = trip;
  }
  return slowest;
}

// Adds `stage`'s reading (rank `worker`) to the costs: the larger of it and what other
// replicas gave, per stage and per link direction.
void AddStage(pipeline::PipelineCosts& c, int stage, int worker, const api::PipelineReading& p) {
  pipeline::StageCost& sc = c.stages[static_cast<size_t>(stage)];
  sc.forward_seconds = std::max(sc.forward_seconds, p.forward_seconds);
  sc.backward_seconds = std::max(sc.backward_seconds, p.backward_seconds);
  const int last = static_cast<int>(c.stages.size()) - 1;
  for (const api::PipelineLinkReading& l : p.links) {
    if (l.peer == worker + 1 && stage < last) {  // activations down link `stage`
      pipeline::LinkCost& down = c.links[static_cast<size_t>(stage)];
      down.activation_seconds = std::max(down.activation_seconds, l.seconds);
      down.activation_latency_seconds = std::max(down.activation_latency_seconds, l.latency_seconds);
    } else if (l.peer == worker - 1 && stage > 0) {  // gradients up link `stage - 1`
      pipeline::LinkCost& up = c.links[static_cast<size_t>(stage - 1)];
      up.gradient_seconds = std::max(up.gradient_seconds, l.seconds);
      up.gradient_latency_seconds = std::max(up.gradient_latency_seconds, l.latency_seconds);
    }
  }
}

}  // namespace

std::optional<pipeline::PipelineCosts> JobControlLoop::PipelineCostsNow() const {
  const int stages = spec_.parallelism.pipeline_stages;
  pipeline::PipelineCosts c;
  c.stages.resize(static_cast<size_t>(stages));
  c.links.resize(static_cast<size_t>(stages - 1));
  c.micro_batches = spec_.parallelism.micro_batches;
  std::vector<bool> seen(static_cast<size_t>(stages), false);
  for (int w = 0; w < n_; ++w) {
    const std::optional<api::PipelineReading>& p = workers_[static_cast<size_t>(w)].pipeline;
    if (!p) continue;
    seen[static_cast<size_t>(w % stages)] = true;
    AddStage(c, w % stages, w, *p);
  }
  if (std::find(seen.begin(), seen.end(), false) != seen.end()) return std::nullopt;
  return c;
}

std::vector<int> JobControlLoop::ChoosePipelineWarmup(std::optional<ScheduleFields>* event) {
  if (spec_.synchronization.policy != api::SyncPolicy::kAuto) return in_force_.warmup;
  const std::optional<pipeline::PipelineCosts> costs = PipelineCostsNow();
  if (!costs) return in_force_.warmup;
  const StatusOr<pipeline::Plan> plan = pipeline::ChooseWarmup(*costs, spec_.parallelism.max_in_flight_per_stage);
  const std::vector<int> plain = pipeline::OneFOneB(spec_.parallelism.pipeline_stages, costs->micro_batches);
  const StatusOr<double> now = pipeline::IterationSeconds(*costs, in_force_.warmup.empty() ? plain : in_force_.warmup);
  if (!plan.ok() || !now.ok()) return in_force_.warmup;
  // The iteration's work outside the schedule (data loading, the optimizer step), taken
  // as what the stages measured beyond the model's time for the schedule in force: it
  // is the same under any depths, so every time compared below includes it.
  const double outside = std::max(0.0, RecentIterationSeconds(spec_.mitigation.detection.window / 2) - *now);
  const double current = *now + outside, adapted = plan->predicted_seconds + outside;
  const double plain_seconds = plan->static_seconds + outside;
  const double gain = options_.schedule_gain;
  std::vector<int> next = in_force_.warmup;
  double predicted = current;
  if (adapted < current * (1 - gain)) {
    next = plan->warmup == plain ? std::vector<int>{} : plan->warmup;
    predicted = adapted;
  } else if (!in_force_.warmup.empty() && plain_seconds <= current * (1 + gain / 2)) {
    next.clear();
    predicted = plain_seconds;
  }
  ScheduleTrial& trial = schedule_trial_;
  if (next == in_force_.warmup) {
    trial.wants_change = false;
    return next;
  }
  if (!trial.wants_change) {
    trial.wants_change = true;
    trial.proposed_round = rounds_;
  }
  if (rounds_ - trial.proposed_round < spec_.mitigation.detection.window / 2) return in_force_.warmup;
  *event = ScheduleFields{next, predicted, plain_seconds, SlowestLink(*costs)};
  return next;
}

double JobControlLoop::RecentIterationSeconds(int reports) const {
  double slowest = 0;
  for (const WorkerData& wd : workers_) {
    const std::vector<double>& ring = wd.iteration_seconds;  // wd.next: the oldest once full
    const int n = std::min<int>(reports, static_cast<int>(ring.size()));
    double sum = 0;
    for (int k = 1; k <= n; ++k) {
      const int at = (wd.next - k + static_cast<int>(ring.size())) % static_cast<int>(ring.size());
      sum += ring[static_cast<size_t>(at)];
    }
    if (n > 0) slowest = std::max(slowest, sum / n);
  }
  return slowest;
}

std::vector<int> JobControlLoop::JudgeScheduleTrial(std::optional<ScheduleFields>* verdict) {
  ScheduleTrial& trial = schedule_trial_;
  const int64_t window = spec_.mitigation.detection.window;
  if (rounds_ - trial.since_round < 2 * window) return in_force_.warmup;
  trial.open = false;
  const double measured = RecentIterationSeconds(static_cast<int>(window));
  if (measured < trial.static_seconds * (1 - options_.schedule_gain / 2)) return in_force_.warmup;
  trial.hold_rounds = trial.hold_rounds == 0 ? 4 * window : 2 * trial.hold_rounds;
  trial.hold_until_round = rounds_ + trial.hold_rounds;
  const std::optional<pipeline::PipelineCosts> costs = PipelineCostsNow();
  ScheduleFields f{{}, 0, 0, costs ? SlowestLink(*costs) : -1, measured, trial.static_seconds};
  if (costs) {
    const auto plain = pipeline::IterationSeconds(
        *costs, pipeline::OneFOneB(spec_.parallelism.pipeline_stages, costs->micro_batches));
    const auto tried = pipeline::IterationSeconds(*costs, in_force_.warmup);
    // As in ChoosePipelineWarmup: with the work outside the schedule measured under the
    // depths tried.
    const double outside = tried.ok() ? std::max(0.0, measured - *tried) : 0;
    f.predicted_seconds = f.static_seconds = plain.ok() ? *plain + outside : 0;
  }
  *verdict = std::move(f);
  return {};
}

void JobControlLoop::DecidePipeline(double t) {
  std::optional<ScheduleFields> event;
  Setting next = in_force_;
  if (schedule_trial_.open) {
    next.warmup = JudgeScheduleTrial(&event);
  } else if (!in_force_.warmup.empty() || rounds_ >= schedule_trial_.hold_until_round) {
    next.warmup = ChoosePipelineWarmup(&event);
  }
  if (next == in_force_ || !event) return;
  const double before = std::exchange(predicted_iteration_seconds_, event->predicted_seconds);
  const int before_link = std::exchange(slow_link_, event->slow_link);
  std::optional<api::Decision> d = Issue(next, MedianIterationSeconds());
  if (!d) {
    predicted_iteration_seconds_ = before;
    slow_link_ = before_link;
    return;
  }
  timeline_.push_back(MakeScheduleEvent(t, *std::move(event)));
  schedule_trial_.wants_change = false;
  if (in_force_.warmup.empty()) {
    schedule_trial_.open = true;
    schedule_trial_.since_round = rounds_;
    schedule_trial_.static_seconds = RecentIterationSeconds(spec_.mitigation.detection.window / 2);
  }
  in_force_ = std::move(next);
  decision_ = std::move(d);
  decision_switches_ = true;  // every stage changes together: the next waits until all passed it
}

}  // namespace star::op
