// Per-worker AMP (mixed precision) on/off policy with hysteresis (Korel,
// ALGORITHMS.md section 5).
//
// AMP speeds up a worker whose GPU/CPU is contended, at the cost of accuracy headroom,
// so it is switched on only for COMPUTE stragglers and switched off again once the
// worker has recovered for a while. Communication stragglers never get AMP (it would
// not shorten their link time).
#pragma once

#include <cstdint>
#include <vector>

#include "star/core/api/types.h"
#include "star/core/status.h"

namespace star::amp {

struct AmpOptions {
  // false: the policy never turns AMP on (TrainingJob spec.mitigation.amp.enabled).
  bool enabled = true;
  // AMP goes on once a worker has been a compute straggler for this many consecutive
  // observations. Default 1: the detector already debounces onset. Must be >= 1.
  int enable_after = 1;
  // AMP goes off once a worker has NOT been a compute straggler (recovered, or
  // straggling on communication only) for this many consecutive observations.
  // Default 5. Must be >= 1.
  int disable_after = 5;
};

// OK, or InvalidArgument naming the field ("enable_after: must be >= 1, got 0").
[[nodiscard]] Status Validate(const AmpOptions& options);

// Not thread-safe; one instance per job. Memory grows with the largest worker id seen.
class AmpPolicy {
 public:
  struct Change {
    int worker = 0;
    bool amp = false;         // the new desired state
    int64_t iteration = 0;    // the observation's iteration that caused the change
    friend bool operator==(const Change&, const Change&) = default;
  };

  // Options must satisfy Validate (checked with an assert; use Create to get a Status).
  explicit AmpPolicy(AmpOptions options);
  [[nodiscard]] static StatusOr<AmpPolicy> Create(AmpOptions options);

  // Feeds one observation of one worker (typically once per report round):
  // `straggling` and `cause` as classified by the detector (cause is ignored when not
  // straggling). Appends to *changes (if non-null) when the worker's desired AMP
  // state flips. Errors (and no state change): worker < 0; iteration lower than this
  // worker's previous observation.
  [[nodiscard]] Status Observe(int worker, bool straggling, api::StragglerCause cause,
                               int64_t iteration, std::vector<Change>* changes);

  // Desired AMP state of a worker (false for workers never observed).
  [[nodiscard]] bool Enabled(int worker) const;
  // Desired AMP state of workers 0..n-1.
  [[nodiscard]] std::vector<bool> States(int n) const;

  // Forgets a worker (e.g. it left the job); its AMP state becomes off without a Change.
  void Forget(int worker);
  // Sets a worker's AMP state without a Change (a controller resuming the state in force);
  // its streaks start over. Ignored for worker < 0.
  void Restore(int worker, bool amp);

 private:
  struct WorkerState {
    bool amp = false;
    bool seen = false;
    int compute_streak = 0;  // consecutive compute-straggler observations
    int calm_streak = 0;     // consecutive observations without a compute straggle
    int64_t last_iteration = 0;
  };

  AmpOptions options_;
  std::vector<WorkerState> workers_;
};

}  // namespace star::amp
