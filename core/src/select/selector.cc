#include "star/core/select/selector.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string>

#include "select/sorted_internal.h"
#include "star/core/api/json_reader.h"

namespace star::select {

using api::FormatNumber;
using api::SyncMode;

Status Validate(const SelectionInput& in) {
  if (in.architecture != api::Architecture::kAllReduce &&
      in.architecture != api::Architecture::kParameterServer) {
    return Status::InvalidArgument("architecture: unknown value " +
                                   std::to_string(static_cast<int>(in.architecture)));
  }
  if (!std::isfinite(in.batch_per_worker) || in.batch_per_worker <= 0) {
    return Status::InvalidArgument("batch_per_worker: must be > 0, got " +
                                   FormatNumber(in.batch_per_worker));
  }
  if (!std::isfinite(in.noise_scale) || in.noise_scale < 0) {
    return Status::InvalidArgument("noise_scale: must be >= 0, got " +
                                   FormatNumber(in.noise_scale));
  }
  if (in.iteration_seconds.empty()) {
    return Status::InvalidArgument("iteration_seconds: must not be empty");
  }
  if (static_cast<int64_t>(in.iteration_seconds.size()) > kMaxWorkers) {
    return Status::InvalidArgument("iteration_seconds: must have at most " +
                                   std::to_string(kMaxWorkers) + " entries, got " +
                                   std::to_string(in.iteration_seconds.size()));
  }
  for (size_t i = 0; i < in.iteration_seconds.size(); ++i) {
    const double t = in.iteration_seconds[i];
    if (!std::isfinite(t) || t <= 0) {
      return Status::InvalidArgument(api::IndexPath("iteration_seconds", i) +
                                     ": must be > 0, got " + FormatNumber(t));
    }
  }
  return Status::Ok();
}

Status Validate(const SelectOptions& o) {
  auto fail = [](const char* field, const std::string& reason) {
    return Status::InvalidArgument(std::string(field) + ": " + reason);
  };
  if (o.simulated_updates < 1) {
    return fail("simulated_updates", "must be >= 1, got " + std::to_string(o.simulated_updates));
  }
  if (o.max_simulated_gradients < 1) {
    return fail("max_simulated_gradients",
                "must be >= 1, got " + std::to_string(o.max_simulated_gradients));
  }
  if (o.simulate_up_to_workers < 1) {
    return fail("simulate_up_to_workers",
                "must be >= 1, got " + std::to_string(o.simulate_up_to_workers));
  }
  if (!std::isfinite(o.group_threshold_seconds) || o.group_threshold_seconds < 0) {
    return fail("group_threshold_seconds",
                "must be >= 0, got " + FormatNumber(o.group_threshold_seconds));
  }
  if (!std::isfinite(o.group_threshold_relative) || o.group_threshold_relative < 0) {
    return fail("group_threshold_relative",
                "must be >= 0, got " + FormatNumber(o.group_threshold_relative));
  }
  if (!std::isfinite(o.asgd_resource_penalty) || o.asgd_resource_penalty < 1) {
    return fail("asgd_resource_penalty",
                "must be >= 1, got " + FormatNumber(o.asgd_resource_penalty));
  }
  if (!std::isfinite(o.ssgd_preference_margin) || o.ssgd_preference_margin < 0) {
    return fail("ssgd_preference_margin",
                "must be >= 0, got " + FormatNumber(o.ssgd_preference_margin));
  }
  if (o.min_k < 1) return fail("min_k", "must be >= 1, got " + std::to_string(o.min_k));
  if (!std::isfinite(o.learned_override_margin) || o.learned_override_margin < 0) {
    return fail("learned_override_margin",
                "must be >= 0, got " + FormatNumber(o.learned_override_margin));
  }
  if (std::isnan(o.learned_max_estimate_ratio) || o.learned_max_estimate_ratio < 1) {
    return fail("learned_max_estimate_ratio",
                "must be >= 1, got " + FormatNumber(o.learned_max_estimate_ratio));
  }
  return Status::Ok();
}

namespace {

std::vector<int> Everyone(int n) {
  std::vector<int> everyone(n);
  std::iota(everyone.begin(), everyone.end(), 0);
  return everyone;
}

Candidate SsgdCandidate(const std::vector<double>& t, const internal::SortedTimes& sorted,
                        double b, double phi) {
  const int n = static_cast<int>(t.size());
  Candidate ssgd;
  ssgd.mode = SyncMode::kSsgd;
  ssgd.k = n;
  ssgd.groups = {Everyone(n)};
  ssgd.update_interval_seconds = sorted.seconds.back();
  ssgd.effective_batch = n * b;
  ssgd.estimated_seconds_per_progress = SsgdSecondsPerProgress(t, b, phi);
  return ssgd;
}

// Waiting for the k* fastest of n workers; nullopt when k* is everyone.
std::optional<Candidate> FixedKCandidate(const std::vector<double>& t,
                                         const internal::SortedTimes& sorted, double b,
                                         double phi, const SelectOptions& options) {
  const int n = static_cast<int>(t.size());
  const int k = std::max(internal::StarKStarSorted(sorted.seconds, b, phi), options.min_k);
  if (k >= n) return std::nullopt;
  const int64_t rounds = kSteadyStateRounds * ((static_cast<int64_t>(n) + k - 1) / k);
  const int updates = static_cast<int>(
      std::min<int64_t>(std::max<int64_t>(options.simulated_updates, rounds),
                        std::numeric_limits<int>::max()));
  const FixedKSimulation sim =
      n <= options.simulate_up_to_workers
          ? SimulateFixedK(t, k, updates, options.max_simulated_gradients)
          : FixedKMeanField(t, k);
  Candidate fixed;
  fixed.mode = SyncMode::kFixedK;
  fixed.k = k;
  fixed.groups = {Everyone(n)};
  fixed.update_interval_seconds = sim.interval_seconds;
  fixed.effective_batch = sim.mean_contributions * b;
  fixed.estimated_seconds_per_progress = FixedKSecondsPerProgress(sim, b, phi);
  return fixed;
}

// Synchronous groups of similar speed; nullopt when the workers do not split into
// several groups of at least min_k.
std::optional<Candidate> GroupsCandidate(const std::vector<double>& t,
                                         const internal::SortedTimes& sorted, double b,
                                         double phi, const SelectOptions& options) {
  auto groups = internal::ClusterSorted(sorted, options.group_threshold_seconds,
                                        options.group_threshold_relative);
  const bool big_enough = std::all_of(groups.begin(), groups.end(), [&](const auto& g) {
    return static_cast<int>(g.size()) >= options.min_k;
  });
  if (groups.size() <= 1 || !big_enough) return std::nullopt;
  Candidate g;
  g.mode = SyncMode::kGroups;
  g.k = static_cast<int>(t.size());
  double update_rate = 0, samples_rate = 0;
  for (const auto& group : groups) {
    double t_max = 0;
    for (int id : group) t_max = std::max(t_max, t[id]);
    update_rate += 1.0 / t_max;
    samples_rate += static_cast<double>(group.size()) * b / t_max;
  }
  g.update_interval_seconds = 1.0 / update_rate;
  g.effective_batch = samples_rate / update_rate;
  g.estimated_seconds_per_progress = GroupsSecondsPerProgress(t, groups, b, phi);
  g.groups = std::move(groups);
  return g;
}

Candidate AsgdCandidate(const std::vector<double>& t, double b, double phi,
                        const SelectOptions& options) {
  Candidate a;
  a.mode = SyncMode::kAsgd;
  a.k = 1;
  a.groups = {Everyone(static_cast<int>(t.size()))};
  double rate = 0;
  for (double ti : t) rate += 1.0 / ti;
  a.update_interval_seconds = 1.0 / rate;
  a.effective_batch = b;
  a.estimated_seconds_per_progress =
      AsgdSecondsPerProgress(t, b, phi, options.asgd_resource_penalty);
  return a;
}

// The fastest candidate, unless SSGD (candidates.front()) is no slower than k* and within
// the preference margin of the fastest.
size_t ChooseCandidate(const std::vector<Candidate>& candidates, double kstar_estimate,
                       const SelectOptions& options) {
  size_t best = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (candidates[i].estimated_seconds_per_progress <
        candidates[best].estimated_seconds_per_progress) {
      best = i;
    }
  }
  const double ssgd_estimate = candidates.front().estimated_seconds_per_progress;
  const double best_estimate = candidates[best].estimated_seconds_per_progress;
  const bool keep_ssgd = ssgd_estimate <= kstar_estimate &&
                         ssgd_estimate <= (1 + options.ssgd_preference_margin) * best_estimate;
  return keep_ssgd ? 0 : best;
}

}  // namespace

StatusOr<Selection> Select(const SelectionInput& in, const SelectOptions& options) {
  STAR_RETURN_IF_ERROR(Validate(in));
  STAR_RETURN_IF_ERROR(Validate(options));
  const std::vector<double>& t = in.iteration_seconds;
  const int n = static_cast<int>(t.size());
  const double b = in.batch_per_worker;
  const double phi = in.noise_scale;
  const internal::SortedTimes sorted = internal::SortTimes(t);

  std::vector<Candidate> candidates;
  candidates.push_back(SsgdCandidate(t, sorted, b, phi));
  double kstar_estimate = candidates.front().estimated_seconds_per_progress;
  if (auto fixed = FixedKCandidate(t, sorted, b, phi, options)) {
    kstar_estimate = fixed->estimated_seconds_per_progress;
    candidates.push_back(std::move(*fixed));
  }
  if (options.consider_groups && n > 1) {
    if (auto groups = GroupsCandidate(t, sorted, b, phi, options)) {
      candidates.push_back(std::move(*groups));
    }
  }
  const bool asgd_allowed = in.architecture == api::Architecture::kParameterServer ||
                            options.allow_asgd_with_allreduce;
  if (asgd_allowed && n > 1 && options.min_k <= 1) {
    candidates.push_back(AsgdCandidate(t, b, phi, options));
  }

  const Candidate& chosen = candidates[ChooseCandidate(candidates, kstar_estimate, options)];
  Selection s;
  s.mode = chosen.mode;
  s.k = chosen.k;
  s.groups = chosen.groups;
  s.estimated_seconds_per_progress = chosen.estimated_seconds_per_progress;
  s.candidates = std::move(candidates);
  return s;
}

}  // namespace star::select
