#include "sim/pipeline_run.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "sim/progress.h"
#include "sim/worker_model.h"

namespace star::sim {
namespace {

// Jitter components beyond WorkerModel's compute (0) and communication (1).
constexpr uint64_t kLinkJitter = 2;

bool Active(const Episode& e, double t) { return t >= e.start && (!e.end || t < *e.end); }

// Per worker: its stage's readings since its last report.
struct Pending {
  int steps = 0;
  double iteration = 0, communication = 0;
  api::PipelineReading reading;  // sums
};

double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

class PipelineRun {
 public:
  PipelineRun(const Scenario& s, op::JobControlLoop loop, const SimOptions& options)
      : s_(s),
        options_(options),
        p_(*s.pipeline),
        loop_(std::move(loop)),
        model_(s),
        progress_(ProgressModel{s.noise_scale, s.min_updates, 0, 0, false}),
        replicas_(s.workers / p_.stages),
        pending_(static_cast<size_t>(s.workers)) {}

  StatusOr<SimResult> Go() {
    const double limit = TimeLimitSeconds(s_);
    const double batch = static_cast<double>(replicas_) * static_cast<double>(s_.batch_per_worker);
    for (int64_t k = 0; !progress_.reached() && t_ <= limit; ++k) {
      if (decision_ && k >= decision_->apply_at_iteration) {
        warmup_ = decision_->warmup;
        decision_.reset();
      }
      const std::vector<int> depths = warmup_.empty() ? pipeline::OneFOneB(p_.stages, p_.micro_batches) : warmup_;
      STAR_ASSIGN_OR_RETURN(const double seconds, Iteration(k, depths));
      t_ += seconds;
      (warmup_.empty() ? static_seconds_ : adapted_seconds_).push_back(seconds);
      progress_.Update(t_, batch);
      STAR_RETURN_IF_ERROR(Report(k));
      iterations_ = k + 1;
    }
    return Result();
  }

 private:
  // Replica r's costs for iteration k starting at t_.
  pipeline::PipelineCosts CostsOf(int r, int64_t k) const {
    pipeline::PipelineCosts c = CleanCosts(p_);
    for (int i = 0; i < p_.stages; ++i) {
      const int w = r * p_.stages + i;
      const double slow = model_.Jitter(w, k, 0) / model_.CpuFraction(w, t_);
      c.stages[static_cast<size_t>(i)].forward_seconds *= slow;
      c.stages[static_cast<size_t>(i)].backward_seconds *= slow;
    }
    for (int i = 0; i + 1 < p_.stages; ++i) {
      const int a = r * p_.stages + i, b = a + 1;
      pipeline::LinkCost& l = c.links[static_cast<size_t>(i)];
      const double kept = std::min(model_.BandwidthFraction(a, t_), model_.BandwidthFraction(b, t_));
      l.activation_seconds *= model_.Jitter(a, k, kLinkJitter) / kept;
      l.gradient_seconds *= model_.Jitter(b, k, kLinkJitter) / kept;
      l.activation_latency_seconds = l.gradient_latency_seconds = Delay(a, b);
    }
    return c;
  }

  // The added delay on the link between workers a and b at t_.
  double Delay(int a, int b) const {
    double d = 0;
    for (const Episode& e : s_.episodes) {
      const bool link = e.peer && ((e.worker == a && *e.peer == b) || (e.worker == b && *e.peer == a));
      if (link && Active(e, t_)) d += *e.delay;
    }
    return d;
  }

  // Iteration k's seconds; records every stage's reading.
  StatusOr<double> Iteration(int64_t k, const std::vector<int>& depths) {
    double slowest = 0, kept = 1;
    for (int r = 0; r < replicas_; ++r) {
      const pipeline::PipelineCosts c = CostsOf(r, k);
      STAR_ASSIGN_OR_RETURN(const double schedule, pipeline::IterationSeconds(c, depths));
      slowest = std::max(slowest, schedule);
      for (int i = 0; i < p_.stages; ++i) {
        const int w = r * p_.stages + i;
        kept = std::min(kept, model_.BandwidthFraction(w, t_));
        Add(w, c);
      }
    }
    const double communication = replicas_ > 1 ? s_.communication_seconds / kept : 0;
    for (int w = 0; w < s_.workers; ++w) {
      Pending& p = pending_[static_cast<size_t>(w)];
      p.iteration += slowest + p_.outside_seconds;
      p.communication += communication;
      ++p.steps;
      if (options_.trace != nullptr) {
        *options_.trace << k << ',' << w << ',' << slowest + p_.outside_seconds << ',' << communication << '\n';
      }
    }
    return slowest + p_.outside_seconds + communication;
  }

  // Adds worker w's stage costs and links under `c` to its pending reading.
  void Add(int w, const pipeline::PipelineCosts& c) {
    const int stage = w % p_.stages;
    api::PipelineReading& sum = pending_[static_cast<size_t>(w)].reading;
    sum.stage = stage;
    sum.forward_seconds += c.stages[static_cast<size_t>(stage)].forward_seconds;
    sum.backward_seconds += c.stages[static_cast<size_t>(stage)].backward_seconds;
    if (sum.links.empty()) {  // the previous stage's link first, as the trainer reports
      if (stage > 0) sum.links.push_back({w - 1, 0, 1});
      if (stage + 1 < p_.stages) sum.links.push_back({w + 1, 0, 1});
    }
    for (api::PipelineLinkReading& l : sum.links) {
      const bool up = l.peer < w;  // gradients go up to the previous stage
      const pipeline::LinkCost& link = c.links[static_cast<size_t>(up ? stage - 1 : stage)];
      l.seconds += up ? link.gradient_seconds : link.activation_seconds;
      l.latency_seconds += up ? link.gradient_latency_seconds : link.activation_latency_seconds;
    }
  }

  // Every report_every iterations, each stage's report (means) to the loop.
  Status Report(int64_t k) {
    if (pending_[0].steps < s_.report_every) return Status::Ok();
    for (int w = 0; w < s_.workers; ++w) {
      Pending p = std::exchange(pending_[static_cast<size_t>(w)], Pending{});
      const double n = p.steps;
      api::WorkerReport r;
      r.job = "sim";
      r.worker = w;
      r.iteration = k + 1;
      r.iterations = p.steps;
      r.time_seconds = t_;
      r.compute_seconds = p.iteration / n;
      r.communication_seconds = p.communication / n;
      r.local_batch = static_cast<int>(s_.batch_per_worker);
      p.reading.forward_seconds /= n;
      p.reading.backward_seconds /= n;
      for (api::PipelineLinkReading& l : p.reading.links) {
        l.seconds /= n;
        l.latency_seconds /= n;
      }
      r.pipeline = std::move(p.reading);
      STAR_RETURN_IF_ERROR(Observe(r));
    }
    return Status::Ok();
  }

  Status Observe(const api::WorkerReport& r) {
    auto decision = loop_.Observe(r);
    if (!decision.ok()) {
      return Status::Internal("the control loop rejected a simulated report: " + decision.status().message());
    }
    if (*decision && (*decision)->epoch > last_epoch_) {
      last_epoch_ = (*decision)->epoch;
      ++decisions_;
      decision_ = **decision;  // a newer decision replaces a pending one
    }
    return Status::Ok();
  }

  SimResult Result() const {
    SimResult r;
    r.tta_seconds = progress_.tta();
    r.updates = progress_.updates();
    r.iterations = iterations_;
    r.decisions = decisions_;
    r.timeline = loop_.timeline();
    r.pipeline = true;
    if (!static_seconds_.empty()) r.static_iteration_seconds = Median(static_seconds_);
    if (!adapted_seconds_.empty()) r.adapted_iteration_seconds = Median(adapted_seconds_);
    return r;
  }

  const Scenario& s_;
  const SimOptions& options_;
  const PipelineScenario& p_;
  op::JobControlLoop loop_;
  WorkerModel model_;
  Progress progress_;
  const int replicas_;
  std::vector<Pending> pending_;          // per worker
  double t_ = 0;                          // when the next iteration starts
  std::vector<int> warmup_;               // the depths in force; empty: static 1F1B
  std::optional<api::Decision> decision_;  // not yet applied
  std::vector<double> static_seconds_, adapted_seconds_;
  int64_t iterations_ = 0;
  int64_t last_epoch_ = 0;
  int64_t decisions_ = 0;
};

}  // namespace

StatusOr<SimResult> SimulatePipeline(const Scenario& s, op::JobControlLoop loop, const SimOptions& options) {
  return PipelineRun(s, std::move(loop), options).Go();
}

}  // namespace star::sim
