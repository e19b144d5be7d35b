// eta_replay: how honest the progress line's ETA (local::EstimateEtaSeconds) is on real
// accuracy curves. Reads tta_bench results (results.json: every run of every scenario)
// and `star local --report` files, and at each evaluation below the target replays what
// the progress line would have said against the time actually left (the run's
// tta_seconds minus the evaluation's time). Prints, for the estimator in use and for the
// exponential fit over the newest 6 evaluations it replaced: estimates, unknowns, how
// many under-estimate, the median and 75th percentile of |error| / time left, and the
// median |error| within 10 s of the target.
//
// Usage: eta_replay_bench FILE...   (e.g. bench/tta/out/run*/runs/*.json, what bench/tta/run.sh writes)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "local/eta.h"

namespace {

using nlohmann::json;
using Curve = std::vector<std::pair<double, double>>;
using Estimator = std::optional<double> (*)(const Curve&, double, double);

// The estimator before: log(1 - accuracy) linear in time over the newest 6 evaluations,
// floored at their mean spacing.
std::optional<double> ExponentialNewest6(const Curve& curve, double target, double now) {
  if (curve.size() < 3) return std::nullopt;
  const Curve points(curve.end() - std::min<size_t>(curve.size(), 6), curve.end());
  std::vector<std::pair<double, double>> xy;
  for (const auto& [t, a] : points) xy.emplace_back(t, std::log(std::max(1 - a, 1e-6)));
  const auto line = star::local::FitLine(xy);
  if (!line || !(line->slope < 0)) return std::nullopt;
  const double at = (std::log(1 - target) - line->intercept) / line->slope;
  return std::max(at - now, (points.back().first - points.front().first) /
                                static_cast<double>(points.size() - 1));
}

struct Run {
  Curve curve;  // sorted by time
  double target = 0;
  double tta = 0;
};

// The runs of one file: a tta_bench results.json or one `star local` report.
std::vector<Run> RunsOf(const json& doc) {
  std::vector<json> reports;
  if (doc.contains("scenarios")) {
    for (const json& s : doc["scenarios"]) {
      for (const auto& [policy, report] : s["runs"].items()) reports.push_back(report);
    }
  } else {
    reports.push_back(doc);
  }
  std::vector<Run> runs;
  const double file_target = doc.value("target_accuracy", 0.0);
  for (const json& r : reports) {
    if (!r.contains("accuracy_curve") || !r["tta_seconds"].is_number()) continue;
    Run run{r["accuracy_curve"].get<Curve>(), r.value("target_accuracy", file_target),
            r["tta_seconds"].get<double>()};
    std::sort(run.curve.begin(), run.curve.end());
    if (run.target > 0) runs.push_back(std::move(run));
  }
  return runs;
}

struct Tally {
  std::vector<double> relative_errors, near_end_errors;
  int estimates = 0, unknown = 0, under = 0;
};

// Replays `estimate` at every evaluation of `run` below its target.
void Replay(const Run& run, Estimator estimate, Tally* tally) {
  for (size_t k = 1; k <= run.curve.size(); ++k) {
    const auto [now, accuracy] = run.curve[k - 1];
    if (accuracy >= run.target) break;
    const double left = run.tta - now;
    const auto eta = estimate(Curve(run.curve.begin(), run.curve.begin() + k), run.target, now);
    ++tally->estimates;
    if (!eta) {
      ++tally->unknown;
      continue;
    }
    if (*eta < left) ++tally->under;
    tally->relative_errors.push_back(std::abs(*eta - left) / std::max(left, 1.0));
    if (left <= 10) tally->near_end_errors.push_back(std::abs(*eta - left));
  }
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

void Print(const char* name, const Tally& t) {
  std::printf("%-28s %9d %7d %14d %12.2f %9.2f %20.1f\n", name, t.estimates, t.unknown, t.under,
              Quantile(t.relative_errors, 0.5), Quantile(t.relative_errors, 0.75),
              Quantile(t.near_end_errors, 0.5));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: eta_replay_bench FILE...  (tta_bench results.json or star local reports)\n";
    return 2;
  }
  std::vector<Run> runs;
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i]);
    const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!in || doc.is_discarded()) {
      std::cerr << "eta_replay_bench: " << argv[i] << ": cannot read JSON\n";
      return 1;
    }
    for (Run& r : RunsOf(doc)) runs.push_back(std::move(r));
  }
  Tally now, before;
  for (const Run& r : runs) {
    Replay(r, star::local::EstimateEtaSeconds, &now);
    Replay(r, ExponentialNewest6, &before);
  }
  std::printf("%zu runs that reached the target\n", runs.size());
  std::printf("%-28s %9s %7s %14s %12s %9s %20s\n", "estimator", "estimates", "unknown",
              "under-estimate", "median rel.", "p75 rel.", "median abs <=10s (s)");
  Print("power law (in use)", now);
  Print("exponential, newest 6", before);
  return 0;
}
