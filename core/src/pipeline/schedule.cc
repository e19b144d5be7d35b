#include "star/core/pipeline/schedule.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

namespace star::pipeline {

namespace {

constexpr int kMaxStages = 64;
constexpr int kMaxMicroBatches = 1024;
// The greedy search stops after this many schedules (each O(S * M)).
constexpr int kMaxEvaluations = 4096;

Status Invalid(const std::string& field, const std::string& reason) {
  return Status::InvalidArgument(field + ": " + reason);
}

bool Cost(double v) { return std::isfinite(v) && v >= 0; }

// An event simulation of one iteration; every stage runs its ops in order, each as soon
// as the stage is free and its input has arrived.
class Simulation {
 public:
  Simulation(const PipelineCosts& c, const std::vector<int>& warmup)
      : c_(c), s_(static_cast<int>(c.stages.size())), m_(c.micro_batches) {
    for (int i = 0; i < s_; ++i) order_.push_back(StageOps(warmup[static_cast<size_t>(i)], m_));
    activation_in_.assign(static_cast<size_t>(s_), std::vector<double>(static_cast<size_t>(m_), -1));
    gradient_in_ = activation_in_;
    std::fill(activation_in_[0].begin(), activation_in_[0].end(), 0.0);
    next_.assign(static_cast<size_t>(s_), 0);
    stage_free_.assign(static_cast<size_t>(s_), 0);
    down_free_.assign(static_cast<size_t>(std::max(s_ - 1, 0)), 0);
    up_free_ = down_free_;
  }

  // The time the last op ends; nullopt if the stages wait on each other forever.
  std::optional<double> Run() {
    bool progress = true;
    while (progress) {
      progress = false;
      for (int i = 0; i < s_; ++i) progress |= Advance(i);
    }
    for (int i = 0; i < s_; ++i) {
      if (next_[static_cast<size_t>(i)] < order_[static_cast<size_t>(i)].size()) return std::nullopt;
    }
    return *std::max_element(stage_free_.begin(), stage_free_.end());
  }

 private:
  // Runs stage i's ops while their inputs are there; true if it ran any.
  bool Advance(int i) {
    const auto si = static_cast<size_t>(i);
    bool ran = false;
    while (next_[si] < order_[si].size()) {
      const StageOp op = order_[si][next_[si]];
      const auto j = static_cast<size_t>(op.micro_batch);
      const double input = op.forward ? activation_in_[si][j] : gradient_in_[si][j];
      if (input < 0) break;
      const StageCost& cost = c_.stages[si];
      const double done = std::max(stage_free_[si], input) +
                          (op.forward ? cost.forward_seconds : cost.backward_seconds);
      stage_free_[si] = done;
      ++next_[si];
      ran = true;
      if (op.forward) Forwarded(i, j, done);
      if (!op.forward && i > 0) {
        const LinkCost& up = c_.links[si - 1];
        Send(up_free_[si - 1], up.gradient_seconds, done + up.gradient_latency_seconds, &gradient_in_[si - 1][j]);
      }
    }
    return ran;
  }

  void Forwarded(int i, size_t j, double done) {
    const auto si = static_cast<size_t>(i);
    if (i == s_ - 1) {
      gradient_in_[si][j] = done;  // the last stage's backward follows its own forward
    } else {
      const LinkCost& down = c_.links[si];
      Send(down_free_[si], down.activation_seconds, done + down.activation_latency_seconds,
           &activation_in_[si + 1][j]);
    }
  }

  // One transfer on a link direction that carries one at a time, in order; `ready`: when
  // the message may go (made, plus the link's latency).
  static void Send(double& link_free, double seconds, double ready, double* arrival) {
    link_free = std::max(link_free, ready) + seconds;
    *arrival = link_free;
  }

  const PipelineCosts& c_;
  int s_, m_;
  std::vector<std::vector<StageOp>> order_;
  std::vector<std::vector<double>> activation_in_, gradient_in_;  // [stage][mb]; -1: not yet
  std::vector<size_t> next_;
  std::vector<double> stage_free_, down_free_, up_free_;
};

Status CheckWarmup(const PipelineCosts& c, const std::vector<int>& w) {
  if (w.size() != c.stages.size()) {
    return Invalid("warmup", "must have one depth per stage (" + std::to_string(c.stages.size()) +
                                 "), got " + std::to_string(w.size()));
  }
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string field = "warmup[" + std::to_string(i) + "]";
    if (w[i] < 1 || w[i] > c.micro_batches) {
      return Invalid(field, "must be in [1, " + std::to_string(c.micro_batches) + "], got " +
                                std::to_string(w[i]));
    }
    if (i > 0 && w[i] > w[i - 1]) {
      return Invalid(field, "must be <= the stage before it (" + std::to_string(w[i - 1]) +
                                "): that stage never sends the activations it would wait for");
    }
  }
  return Status::Ok();
}

// The cap on every depth: the memory bound, M, and at least 1F1B's first depth.
StatusOr<int> Cap(const PipelineCosts& c, std::optional<int> max_in_flight) {
  const int s = static_cast<int>(c.stages.size());
  if (max_in_flight && *max_in_flight < s) {
    return Invalid("max_in_flight", "must be >= the stages (" + std::to_string(s) +
                                        "): 1F1B holds that many on the first stage, got " +
                                        std::to_string(*max_in_flight));
  }
  return std::min(c.micro_batches, max_in_flight.value_or(c.micro_batches));
}

}  // namespace

Status Validate(const PipelineCosts& c) {
  const int s = static_cast<int>(c.stages.size());
  if (s < 1 || s > kMaxStages) {
    return Invalid("stages", "must have 1 to " + std::to_string(kMaxStages) + " entries, got " +
                                 std::to_string(s));
  }
  if (static_cast<int>(c.links.size()) != s - 1) {
    return Invalid("links", "must have one entry per pair of neighbouring stages (" +
                                std::to_string(s - 1) + "), got " + std::to_string(c.links.size()));
  }
  if (c.micro_batches < s || c.micro_batches > kMaxMicroBatches) {
    return Invalid("micro_batches", "must be in [" + std::to_string(s) + ", " +
                                        std::to_string(kMaxMicroBatches) + "], got " +
                                        std::to_string(c.micro_batches));
  }
  for (size_t i = 0; i < c.stages.size(); ++i) {
    if (!Cost(c.stages[i].forward_seconds) || !Cost(c.stages[i].backward_seconds)) {
      return Invalid("stages[" + std::to_string(i) + "]", "costs must be finite and >= 0");
    }
  }
  for (size_t i = 0; i < c.links.size(); ++i) {
    const LinkCost& l = c.links[i];
    if (!Cost(l.activation_seconds) || !Cost(l.gradient_seconds) || !Cost(l.activation_latency_seconds) ||
        !Cost(l.gradient_latency_seconds)) {
      return Invalid("links[" + std::to_string(i) + "]", "costs must be finite and >= 0");
    }
  }
  return Status::Ok();
}

double RoundTripSeconds(const LinkCost& l) {
  return l.activation_seconds + l.gradient_seconds + l.activation_latency_seconds + l.gradient_latency_seconds;
}

std::vector<int> OneFOneB(int stages, int micro_batches) {
  std::vector<int> w(static_cast<size_t>(std::max(stages, 0)));
  for (int i = 0; i < stages; ++i) w[static_cast<size_t>(i)] = std::min(stages - i, micro_batches);
  return w;
}

std::vector<StageOp> StageOps(int warmup, int micro_batches) {
  const int m = std::max(micro_batches, 0);
  const int w = std::clamp(warmup, std::min(1, m), m);
  std::vector<StageOp> ops;
  ops.reserve(static_cast<size_t>(2 * m));
  for (int j = 0; j < w; ++j) ops.push_back({true, j});
  for (int j = 0; j < m; ++j) {
    ops.push_back({false, j});
    if (w + j < m) ops.push_back({true, w + j});
  }
  return ops;
}

StatusOr<double> IterationSeconds(const PipelineCosts& costs, const std::vector<int>& warmup) {
  STAR_RETURN_IF_ERROR(Validate(costs));
  STAR_RETURN_IF_ERROR(CheckWarmup(costs, warmup));
  const std::optional<double> t = Simulation(costs, warmup).Run();
  // Non-increasing depths cannot deadlock; a failure here is a bug in the simulation.
  if (!t) return Status::Internal("pipeline: the schedule deadlocked");
  return *t;
}

StatusOr<std::vector<int>> AdaptedWarmup(const PipelineCosts& costs, std::optional<int> max_in_flight) {
  STAR_RETURN_IF_ERROR(Validate(costs));
  STAR_ASSIGN_OR_RETURN(const int cap, Cap(costs, max_in_flight));
  const int s = static_cast<int>(costs.stages.size());
  double fastest = 0;
  for (size_t i = 0; i < costs.links.size(); ++i) {
    const double trip = RoundTripSeconds(costs.links[i]);
    fastest = i == 0 ? trip : std::min(fastest, trip);
  }
  std::vector<int> w(static_cast<size_t>(s), 1);
  for (int i = s - 2; i >= 0; --i) {
    const auto si = static_cast<size_t>(i);
    const double delay = RoundTripSeconds(costs.links[si]) - fastest;
    const double forward = costs.stages[si].forward_seconds;
    const double extra = delay <= 0 ? 0 : forward > 0 ? std::ceil(delay / forward) : cap;
    w[si] = static_cast<int>(std::min<double>(cap, w[si + 1] + 1 + extra));
  }
  return w;
}

StatusOr<Plan> ChooseWarmup(const PipelineCosts& costs, std::optional<int> max_in_flight) {
  STAR_RETURN_IF_ERROR(Validate(costs));
  STAR_ASSIGN_OR_RETURN(const int cap, Cap(costs, max_in_flight));
  const int s = static_cast<int>(costs.stages.size());
  Plan plan;
  plan.warmup = OneFOneB(s, costs.micro_batches);
  STAR_ASSIGN_OR_RETURN(plan.static_seconds, IterationSeconds(costs, plan.warmup));
  plan.predicted_seconds = plan.static_seconds;
  STAR_ASSIGN_OR_RETURN(std::vector<int> adapted, AdaptedWarmup(costs, max_in_flight));
  STAR_ASSIGN_OR_RETURN(const double adapted_seconds, IterationSeconds(costs, adapted));
  if (adapted_seconds < plan.predicted_seconds) plan = {adapted, adapted_seconds, plan.static_seconds};
  // Greedy: one deeper warm-up for stages 0..i (keeping the depths non-increasing), the
  // best such step while it helps.
  for (int evaluations = 0; evaluations < kMaxEvaluations;) {
    Plan best = plan;
    for (int i = 0; i < s && evaluations < kMaxEvaluations; ++i) {
      std::vector<int> w = plan.warmup;
      for (int k = 0; k <= i; ++k) w[static_cast<size_t>(k)] = std::min(cap, w[static_cast<size_t>(k)] + 1);
      if (w == plan.warmup || !CheckWarmup(costs, w).ok()) continue;
      ++evaluations;
      STAR_ASSIGN_OR_RETURN(const double t, IterationSeconds(costs, w));
      if (t < best.predicted_seconds * (1 - 1e-9)) best = {w, t, plan.static_seconds};
    }
    if (best.warmup == plan.warmup) break;
    plan = best;
  }
  return plan;
}

}  // namespace star::pipeline
