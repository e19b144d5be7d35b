#include "star/core/detect/detector.h"

#include <cmath>
#include <sstream>
#include <utility>

namespace star::detect {
namespace {

constexpr int kMinWindow = 3;
constexpr int kMaxWindow = 1024;
constexpr int kMaxEvaluations = 1000;

std::string Num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

Status Bad(std::string_view field, const std::string& reason) {
  return Status::InvalidArgument(std::string(field) + ": " + reason);
}

double DefaultThreshold(api::DetectionRule rule) {
  switch (rule) {
    case api::DetectionRule::kMad: return 3.0;
    case api::DetectionRule::kRelativeScore: return 0.75;
    case api::DetectionRule::kStar: return 0.2;
    case api::DetectionRule::kChangePoint: return 0.2;
  }
  return 0;
}

double DefaultRecoveryThreshold(api::DetectionRule rule) {
  switch (rule) {
    case api::DetectionRule::kMad: return 2.0;
    case api::DetectionRule::kRelativeScore: return 0.85;
    case api::DetectionRule::kStar: return 0.1;
    case api::DetectionRule::kChangePoint: return 0.1;
  }
  return 0;
}

bool UseDefault(double v) { return std::isnan(v) || v == 0; }

double Round4(double v) { return std::round(v * 1e4) / 1e4; }
}  // namespace

std::string_view RuleName(api::DetectionRule rule) {
  switch (rule) {
    case api::DetectionRule::kMad: return "mad";
    case api::DetectionRule::kRelativeScore: return "relative";
    case api::DetectionRule::kStar: return "star";
    case api::DetectionRule::kChangePoint: return "change_point";
  }
  return "unknown";
}

std::optional<api::DetectionRule> ParseRule(std::string_view s) {
  using R = api::DetectionRule;
  for (R r : {R::kMad, R::kRelativeScore, R::kStar, R::kChangePoint}) {
    if (RuleName(r) == s) return r;
  }
  return std::nullopt;
}

std::string_view ToString(State state) {
  switch (state) {
    case State::kStraggler: return "straggler";
    case State::kRecovered: return "recovered";
  }
  return "unknown";
}

DetectorOptions ResolveDefaults(DetectorOptions options) {
  if (UseDefault(options.threshold)) options.threshold = DefaultThreshold(options.rule);
  if (UseDefault(options.recovery_threshold)) {
    options.recovery_threshold = DefaultRecoveryThreshold(options.rule);
  }
  return options;
}

Status Validate(const DetectorOptions& options) {
  const api::DetectionRule rule = options.rule;
  if (RuleName(rule) == "unknown") {
    return Bad("rule", "unknown rule " + std::to_string(static_cast<int>(rule)));
  }
  if (options.window < kMinWindow || options.window > kMaxWindow) {
    return Bad("window", "must be in [" + std::to_string(kMinWindow) + ", " +
                             std::to_string(kMaxWindow) + "], got " +
                             std::to_string(options.window));
  }
  const std::string rule_name(RuleName(rule));
  for (const auto& [field, value] : {std::pair<std::string_view, double>{"threshold", options.threshold},
                                     {"recovery_threshold", options.recovery_threshold}}) {
    if (std::isnan(value)) continue;
    if (!std::isfinite(value) || value < 0) {
      return Bad(field, "must be a finite number >= 0 (0 or NaN = rule default), got " + Num(value));
    }
  }
  const DetectorOptions r = ResolveDefaults(options);
  if (rule == api::DetectionRule::kRelativeScore) {
    if (r.threshold >= 1) {
      return Bad("threshold", "must be in (0, 1) for rule relative, got " + Num(r.threshold));
    }
    if (r.recovery_threshold > 1) {
      return Bad("recovery_threshold",
                 "must be in (0, 1] for rule relative, got " + Num(r.recovery_threshold));
    }
    if (r.recovery_threshold < r.threshold) {
      return Bad("recovery_threshold", "must be >= threshold (" + Num(r.threshold) +
                                           ") for rule relative, got " +
                                           Num(r.recovery_threshold));
    }
  } else if (r.recovery_threshold > r.threshold) {
    return Bad("recovery_threshold", "must be <= threshold (" + Num(r.threshold) +
                                         ") for rule " + rule_name + ", got " +
                                         Num(r.recovery_threshold));
  }
  if (!std::isfinite(options.min_slowdown) || options.min_slowdown < 1) {
    return Bad("min_slowdown", "must be a finite number >= 1, got " + Num(options.min_slowdown));
  }
  if (!std::isfinite(options.recovery_slowdown) || options.recovery_slowdown < 1 ||
      options.recovery_slowdown > options.min_slowdown) {
    return Bad("recovery_slowdown", "must be in [1, min_slowdown (" +
                                        Num(options.min_slowdown) + ")], got " +
                                        Num(options.recovery_slowdown));
  }
  if (!std::isfinite(options.static_slowdown) || options.static_slowdown < options.min_slowdown) {
    return Bad("static_slowdown", "must be a finite number >= min_slowdown (" +
                                      Num(options.min_slowdown) + "), got " +
                                      Num(options.static_slowdown));
  }
  if (!std::isfinite(options.class_gap) || (options.class_gap != 0 && options.class_gap <= 1)) {
    return Bad("class_gap", "must be 0 (off) or a finite number > 1, got " + Num(options.class_gap));
  }
  if (options.change_point_min_iterations < 0) {
    return Bad("change_point_min_iterations",
               "must be >= 0, got " + std::to_string(options.change_point_min_iterations));
  }
  for (const auto& [field, value] :
       {std::pair<std::string_view, int>{"onset_evaluations", options.onset_evaluations},
        {"recovery_evaluations", options.recovery_evaluations}}) {
    if (value < 1 || value > kMaxEvaluations) {
      return Bad(field, "must be in [1, " + std::to_string(kMaxEvaluations) + "], got " +
                            std::to_string(value));
    }
  }
  if (options.onset_window < 0) {
    return Bad("onset_window", "must be >= 0 (0 = the full window), got " +
                                   std::to_string(options.onset_window));
  }
  if (!std::isfinite(options.step_slowdown) ||
      (options.step_slowdown != 0 && options.step_slowdown <= 1)) {
    return Bad("step_slowdown", "must be 0 (off) or a finite number > 1, got " +
                                    Num(options.step_slowdown));
  }
  if (options.step_samples < 1 || options.step_samples > options.window) {
    return Bad("step_samples", "must be in [1, window (" + std::to_string(options.window) +
                                   ")], got " + std::to_string(options.step_samples));
  }
  if (options.static_after_iterations < 1) {
    return Bad("static_after_iterations",
               "must be >= 1, got " + std::to_string(options.static_after_iterations));
  }
  if (!std::isfinite(options.cause_switch_ratio) || options.cause_switch_ratio < 1) {
    return Bad("cause_switch_ratio",
               "must be a finite number >= 1, got " + Num(options.cause_switch_ratio));
  }
  return Status::Ok();
}

nlohmann::json ToJson(const Event& event) { return nlohmann::json::parse(ToJsonLine(event)); }

std::string ToJsonLine(const Event& event) {
  nlohmann::ordered_json j;  // keeps the contract's key order
  j["iteration"] = event.iteration;
  j["worker"] = event.worker;
  j["state"] = ToString(event.state);
  if (event.state == State::kStraggler) {
    j["cause"] = api::ToString(event.cause);
    j["kind"] = api::ToString(event.kind);
    j["slowdown"] = Round4(event.slowdown);
  }
  return j.dump();
}

}  // namespace star::detect
