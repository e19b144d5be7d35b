#include "star/core/select/learned.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>

#include "star/core/select/clustering.h"
#include "star/core/select/cost_model.h"
#include "star/core/select/fixed_k.h"

namespace star::select {

using api::SyncMode;

namespace {

// Nearest-rank quantile of sorted values, q in [0, 1].
double Quantile(const std::vector<double>& sorted, double q) {
  const auto n = sorted.size();
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
  rank = std::clamp<std::size_t>(rank, 1, n);
  return sorted[rank - 1];
}

std::vector<int> Everyone(int n) {
  std::vector<int> everyone(n);
  std::iota(everyone.begin(), everyone.end(), 0);
  return everyone;
}

int FixedKOf(double fraction, int n, int min_k) {
  const int k = static_cast<int>(std::lround(fraction * n));
  return std::clamp(k, std::max(1, min_k), n);
}

// The Selection of class `c`, or nullopt when the class is not allowed for this job.
std::optional<Selection> SelectionOfClass(int c, const SelectionInput& in,
                                          const SelectOptions& o) {
  const std::vector<double>& t = in.iteration_seconds;
  const int n = static_cast<int>(t.size());
  const double b = in.batch_per_worker, phi = in.noise_scale;
  Selection s;
  s.groups = {Everyone(n)};
  Candidate cand;
  if (c >= kSelectorClassFixedKFirst) {
    const int k = FixedKOf(kFixedKFractions[c - kSelectorClassFixedKFirst], n, o.min_k);
    if (k >= n) {
      c = kSelectorClassSsgd;
    } else {
      const FixedKSimulation sim = FixedKMeanField(t, k);
      s.mode = SyncMode::kFixedK;
      s.k = k;
      cand.update_interval_seconds = sim.interval_seconds;
      cand.effective_batch = sim.mean_contributions * b;
      s.estimated_seconds_per_progress = FixedKSecondsPerProgress(sim, b, phi);
    }
  }
  if (c == kSelectorClassSsgd) {
    s.mode = SyncMode::kSsgd;
    s.k = n;
    cand.update_interval_seconds = *std::max_element(t.begin(), t.end());
    cand.effective_batch = n * b;
    s.estimated_seconds_per_progress = SsgdSecondsPerProgress(t, b, phi);
  } else if (c == kSelectorClassAsgd) {
    const bool allowed = (in.architecture == api::Architecture::kParameterServer ||
                          o.allow_asgd_with_allreduce) &&
                         n > 1 && o.min_k <= 1;
    if (!allowed) return std::nullopt;
    s.mode = SyncMode::kAsgd;
    s.k = 1;
    double rate = 0;
    for (double ti : t) rate += 1.0 / ti;
    cand.update_interval_seconds = 1.0 / rate;
    cand.effective_batch = b;
    s.estimated_seconds_per_progress = AsgdSecondsPerProgress(t, b, phi, o.asgd_resource_penalty);
  } else if (c == kSelectorClassGroups) {
    if (!o.consider_groups || n <= 1) return std::nullopt;
    auto groups = ClusterByTime(t, o.group_threshold_seconds, o.group_threshold_relative);
    const bool big_enough = std::all_of(groups.begin(), groups.end(), [&](const auto& g) {
      return static_cast<int>(g.size()) >= o.min_k;
    });
    if (groups.size() <= 1 || !big_enough) return std::nullopt;
    s.mode = SyncMode::kGroups;
    s.k = n;
    double update_rate = 0, samples_rate = 0;
    for (const auto& group : groups) {
      double t_max = 0;
      for (int id : group) t_max = std::max(t_max, t[id]);
      update_rate += 1.0 / t_max;
      samples_rate += static_cast<double>(group.size()) * b / t_max;
    }
    cand.update_interval_seconds = 1.0 / update_rate;
    cand.effective_batch = samples_rate / update_rate;
    s.estimated_seconds_per_progress = GroupsSecondsPerProgress(t, groups, b, phi);
    s.groups = std::move(groups);
  }
  cand.mode = s.mode;
  cand.k = s.k;
  cand.groups = s.groups;
  cand.estimated_seconds_per_progress = s.estimated_seconds_per_progress;
  s.candidates = {std::move(cand)};
  return s;
}

// The model's choice `learned` (score `best`) unless the heuristic's class scores within
// options.learned_override_margin of it or the cost model puts `learned` above
// options.learned_max_estimate_ratio x the heuristic's estimate: then the heuristic's
// own Selection.
StatusOr<Selection> KeepHeuristicUnlessClearlyWorse(Selection learned, float best,
                                                    const std::vector<float>& scores,
                                                    const SelectionInput& input,
                                                    const SelectOptions& options) {
  StatusOr<Selection> heuristic = Select(input, options);
  if (!heuristic.ok()) return heuristic.status();
  const int n = static_cast<int>(input.iteration_seconds.size());
  const float h = scores[static_cast<std::size_t>(ClassOf(heuristic->mode, heuristic->k, n))];
  if (std::isfinite(h) && best - h < options.learned_override_margin) return heuristic;
  if (learned.estimated_seconds_per_progress >
      options.learned_max_estimate_ratio * heuristic->estimated_seconds_per_progress) {
    return heuristic;
  }
  return learned;
}

}  // namespace

StatusOr<SelectorFeatures> FeaturesOf(const SelectionInput& input, const SelectorContext& context,
                                      const SelectOptions& options) {
  if (Status st = Validate(input); !st.ok()) return st;
  if (Status st = Validate(options); !st.ok()) return st;
  if (!(context.communication_share >= 0 && context.communication_share <= 1)) {
    return Status::InvalidArgument("communication_share: must be in [0, 1], got " +
                                   std::to_string(context.communication_share));
  }
  std::vector<double> sorted = input.iteration_seconds;
  std::sort(sorted.begin(), sorted.end());
  const double n = static_cast<double>(sorted.size());
  const double t_min = sorted.front(), t_max = sorted.back();
  const double t_avg = std::accumulate(sorted.begin(), sorted.end(), 0.0) / n;
  const auto stragglers = std::count_if(sorted.begin(), sorted.end(),
                                        [&](double t) { return (t - t_min) / t_min > 0.2; });
  SelectorFeatures f;
  f.workers = n;
  f.parameter_server = input.architecture == api::Architecture::kParameterServer ? 1 : 0;
  f.straggling_degree = (t_max - t_avg) / t_avg;
  f.straggler_fraction = static_cast<double>(stragglers) / n;
  f.slowdown_p50 = Quantile(sorted, 0.5) / t_min;
  f.slowdown_p90 = Quantile(sorted, 0.9) / t_min;
  f.slowdown_max = t_max / t_min;
  f.communication_share = context.communication_share;
  f.noise_per_global_batch = input.noise_scale / (n * input.batch_per_worker);
  f.noise_per_local_batch = input.noise_scale / input.batch_per_worker;
  f.min_k_fraction = options.min_k / n;
  return f;
}

std::array<float, kSelectorFeatureCount> FeatureVector(const SelectorFeatures& f) {
  return {static_cast<float>(f.workers),
          static_cast<float>(f.parameter_server),
          static_cast<float>(f.straggling_degree),
          static_cast<float>(f.straggler_fraction),
          static_cast<float>(f.slowdown_p50),
          static_cast<float>(f.slowdown_p90),
          static_cast<float>(f.slowdown_max),
          static_cast<float>(f.communication_share),
          static_cast<float>(f.noise_per_global_batch),
          static_cast<float>(f.noise_per_local_batch),
          static_cast<float>(f.min_k_fraction)};
}

int ClassOf(SyncMode mode, int k, int n) {
  switch (mode) {
    case SyncMode::kAsgd:
      return kSelectorClassAsgd;
    case SyncMode::kGroups:
      return kSelectorClassGroups;
    case SyncMode::kFixedK: {
      if (k >= n) return kSelectorClassSsgd;
      int best = 0;
      double best_distance = std::abs(kFixedKFractions[0] * n - k);
      for (std::size_t j = 1; j < kFixedKFractions.size(); ++j) {
        const double d = std::abs(kFixedKFractions[j] * n - k);
        if (d < best_distance) {
          best = static_cast<int>(j);
          best_distance = d;
        }
      }
      return kSelectorClassFixedKFirst + best;
    }
    case SyncMode::kSsgd:
      break;
  }
  return kSelectorClassSsgd;
}

StatusOr<Selection> SelectLearned(LearnedSelector& model, const SelectionInput& input,
                                  const SelectorContext& context, const SelectOptions& options) {
  auto features = FeaturesOf(input, context, options);
  if (!features.ok()) return features.status();
  auto scores = model.Scores(*features);
  if (!scores.ok()) return scores.status();
  if (scores->size() != kSelectorClassCount) {
    return Status::InvalidArgument("model output: expected " +
                                   std::to_string(kSelectorClassCount) + " scores, got " +
                                   std::to_string(scores->size()));
  }
  // Classes by score, best first; ties to the lower class; non-finite scores never.
  std::vector<int> order;
  for (int c = 0; c < static_cast<int>(kSelectorClassCount); ++c) {
    if (std::isfinite((*scores)[c])) order.push_back(c);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return (*scores)[a] > (*scores)[b]; });
  for (int c : order) {
    auto s = SelectionOfClass(c, input, options);
    if (!s) continue;
    if (options.learned_override_margin > 0 || std::isfinite(options.learned_max_estimate_ratio)) {
      return KeepHeuristicUnlessClearlyWorse(std::move(*s), (*scores)[c], *scores, input, options);
    }
    return std::move(*s);
  }
  return Status::InvalidArgument("model output: no finite score for an allowed class");
}

}  // namespace star::select
