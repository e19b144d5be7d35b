#include "star/core/amp/policy.h"

#include <cassert>
#include <string>

namespace star::amp {

Status Validate(const AmpOptions& o) {
  if (o.enable_after < 1) {
    return Status::InvalidArgument("enable_after: must be >= 1, got " +
                                   std::to_string(o.enable_after));
  }
  if (o.disable_after < 1) {
    return Status::InvalidArgument("disable_after: must be >= 1, got " +
                                   std::to_string(o.disable_after));
  }
  return Status();
}

AmpPolicy::AmpPolicy(AmpOptions options) : options_(options) {
  assert(Validate(options_).ok());
}

StatusOr<AmpPolicy> AmpPolicy::Create(AmpOptions options) {
  STAR_RETURN_IF_ERROR(Validate(options));
  return AmpPolicy(options);
}

Status AmpPolicy::Observe(int worker, bool straggling, api::StragglerCause cause,
                          int64_t iteration, std::vector<Change>* changes) {
  if (worker < 0) {
    return Status::InvalidArgument("worker: must be >= 0, got " + std::to_string(worker));
  }
  if (static_cast<size_t>(worker) >= workers_.size()) workers_.resize(static_cast<size_t>(worker) + 1);
  WorkerState& w = workers_[static_cast<size_t>(worker)];
  if (w.seen && iteration < w.last_iteration) {
    return Status::InvalidArgument("iteration: must not go backwards for worker " +
                                   std::to_string(worker) + ", got " + std::to_string(iteration) +
                                   " after " + std::to_string(w.last_iteration));
  }
  w.seen = true;
  w.last_iteration = iteration;

  const bool compute_straggler = straggling && cause == api::StragglerCause::kCompute;
  if (compute_straggler) {
    ++w.compute_streak;
    w.calm_streak = 0;
  } else {
    w.compute_streak = 0;
    ++w.calm_streak;
  }
  bool want = w.amp;
  if (!options_.enabled) {
    want = false;
  } else if (!w.amp && w.compute_streak >= options_.enable_after) {
    want = true;
  } else if (w.amp && w.calm_streak >= options_.disable_after) {
    want = false;
  }
  if (want != w.amp) {
    w.amp = want;
    if (changes != nullptr) changes->push_back({worker, want, iteration});
  }
  return Status();
}

bool AmpPolicy::Enabled(int worker) const {
  return worker >= 0 && static_cast<size_t>(worker) < workers_.size() &&
         workers_[static_cast<size_t>(worker)].amp;
}

std::vector<bool> AmpPolicy::States(int n) const {
  std::vector<bool> out(static_cast<size_t>(std::max(n, 0)));
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = Enabled(i);
  return out;
}

void AmpPolicy::Restore(int worker, bool amp) {
  if (worker < 0) return;
  if (static_cast<size_t>(worker) >= workers_.size()) workers_.resize(static_cast<size_t>(worker) + 1);
  WorkerState& w = workers_[static_cast<size_t>(worker)];
  w = WorkerState{};
  w.amp = amp;
}

void AmpPolicy::Forget(int worker) {
  if (worker >= 0 && static_cast<size_t>(worker) < workers_.size()) {
    workers_[static_cast<size_t>(worker)] = WorkerState{};
  }
}

}  // namespace star::amp
