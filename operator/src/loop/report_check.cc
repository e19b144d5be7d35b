#include <cmath>
#include <string>
#include <utility>

#include "star/operator/control_loop.h"

namespace star::op {
namespace {

Status Bad(const std::string& field, const std::string& why) {
  return Status::InvalidArgument(field + ": " + why);
}

bool NonNegative(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

Status JobControlLoop::CheckAccuracy(double t, double accuracy) {
  if (!NonNegative(t)) return Bad("accuracy_time_seconds", "must be finite and >= 0");
  if (!(std::isfinite(accuracy) && accuracy >= 0 && accuracy <= 1)) {
    return Bad("accuracy", "must be finite and in [0, 1]");
  }
  return Status::Ok();
}

Status JobControlLoop::CheckReport(const api::WorkerReport& r) const {
  if (r.worker < 0 || r.worker >= n_) {
    return Bad("worker", "must be in [0, " + std::to_string(n_) + "), got " +
                             std::to_string(r.worker));
  }
  if (r.iteration < 0 || r.iteration > kMaxIteration) {
    return Bad("iteration", "must be in [0, " + std::to_string(kMaxIteration) + "], got " + std::to_string(r.iteration));
  }
  const int64_t prev = workers_[static_cast<size_t>(r.worker)].last_iteration;
  if (r.iteration < prev) {
    return Bad("iteration", "must be >= the worker's previous report (" + std::to_string(prev) +
                                "), got " + std::to_string(r.iteration));
  }
  if (r.iterations < 1) {
    return Bad("iterations", "must be >= 1, got " + std::to_string(r.iterations));
  }
  const std::pair<const char*, double> times[] = {
      {"time_seconds", r.time_seconds},
      {"compute_seconds", r.compute_seconds},
      {"communication_seconds", r.communication_seconds},
      {"wait_seconds", r.wait_seconds}};
  for (const auto& [name, v] : times) {
    if (!NonNegative(v)) return Bad(name, "must be finite and >= 0");
  }
  if (r.local_batch < 1) {
    return Bad("local_batch", "must be >= 1, got " + std::to_string(r.local_batch));
  }
  if (r.local_grad_sq_norm && !NonNegative(*r.local_grad_sq_norm)) {
    return Bad("local_grad_sq_norm", "must be finite and >= 0");
  }
  if (r.global_grad_sq_norm && !NonNegative(*r.global_grad_sq_norm)) {
    return Bad("global_grad_sq_norm", "must be finite and >= 0");
  }
  if (r.link) {
    if (r.link->peer < 0 || r.link->peer >= n_ || r.link->peer == r.worker) {
      return Bad("link_peer", "must be another worker in [0, " + std::to_string(n_) + "), got " +
                                  std::to_string(r.link->peer));
    }
    if (!NonNegative(r.link->seconds)) return Bad("link_seconds", "must be finite and >= 0");
    if (r.link->bytes < 1) return Bad("link_bytes", "must be >= 1, got " + std::to_string(r.link->bytes));
  }
  if (r.accuracy) {
    return CheckAccuracy(r.accuracy_time_seconds.value_or(r.time_seconds), *r.accuracy);
  }
  if (r.accuracy_time_seconds) return Bad("accuracy_time_seconds", "only allowed with accuracy");
  return Status::Ok();
}

}  // namespace star::op
