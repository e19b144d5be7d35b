#include "star/operator/loop_options.h"

#include <cmath>
#include <string>

namespace star::op {
namespace {

Status AtLeast(const char* field, int64_t value, int64_t min) {
  if (value >= min) return Status::Ok();
  return Status::InvalidArgument(std::string("options.") + field + ": must be >= " +
                                 std::to_string(min) + ", got " + std::to_string(value));
}

// NaN fails every comparison, so `ok` is false for it.
Status Check(bool ok, const char* field, const char* rule) {
  if (ok) return Status::Ok();
  return Status::InvalidArgument(std::string("options.") + field + ": " + rule);
}

bool Finite(double x) { return std::isfinite(x); }

}  // namespace

Status Validate(const LoopOptions& o) {
  STAR_RETURN_IF_ERROR(AtLeast("decide_every_rounds", o.decide_every_rounds, 1));
  STAR_RETURN_IF_ERROR(AtLeast("apply_margin_iterations", o.apply_margin_iterations, 0));
  STAR_RETURN_IF_ERROR(AtLeast("time_window", o.time_window, 1));
  STAR_RETURN_IF_ERROR(Check(o.default_noise_scale >= 0 && Finite(o.default_noise_scale),
                             "default_noise_scale", "must be finite and >= 0"));
  STAR_RETURN_IF_ERROR(AtLeast("warmup_iterations", o.warmup_iterations, 0));
  STAR_RETURN_IF_ERROR(Check(o.auto_min_spread >= 1 && Finite(o.auto_min_spread),
                             "auto_min_spread", "must be finite and >= 1"));
  STAR_RETURN_IF_ERROR(Check(o.auto_switch_margin >= 0 && o.auto_switch_margin < 1,
                             "auto_switch_margin", "must be in [0, 1)"));
  STAR_RETURN_IF_ERROR(AtLeast("mode_dwell_rounds", o.mode_dwell_rounds, 0));
  STAR_RETURN_IF_ERROR(Check(o.mode_switch_margin >= 0 && o.mode_switch_margin < 1,
                             "mode_switch_margin", "must be in [0, 1)"));
  STAR_RETURN_IF_ERROR(Check(o.schedule_gain >= 0 && o.schedule_gain < 1, "schedule_gain", "must be in [0, 1)"));
  STAR_RETURN_IF_ERROR(Check(o.amp_release_slowdown >= 1 && Finite(o.amp_release_slowdown),
                             "amp_release_slowdown", "must be finite and >= 1"));
  STAR_RETURN_IF_ERROR(Check(o.min_batch_gain >= 0 && o.min_batch_gain < 1,
                             "min_batch_gain", "must be in [0, 1)"));
  STAR_RETURN_IF_ERROR(Check(o.max_drift_wait_seconds >= 0 && !std::isnan(o.max_drift_wait_seconds),
                             "max_drift_wait_seconds", "must be >= 0"));
  return AtLeast("resource_release_rounds", o.resource_release_rounds, 1);
}

}  // namespace star::op
