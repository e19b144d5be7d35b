// The control loop's reallocation request (the rule is in resource_needs.h).
#include <algorithm>

#include "star/operator/control_loop.h"

namespace star::op {

void JobControlLoop::UpdateResourceNeeds(double typical) {
  if (!spec_.mitigation.resource_reallocation.enabled) return;
  std::vector<ResourceNeed> next;
  size_t j = 0;  // needs_.workers is ascending by worker
  for (int w = 0; w < n_; ++w) {
    const ResourceNeed* listed = nullptr;
    if (j < needs_.workers.size() && needs_.workers[j].worker == w) listed = &needs_.workers[j++];
    if (std::optional<ResourceNeed> need = NeedOf(w, listed, typical)) next.push_back(*need);
  }
  if (next == needs_.workers) return;
  needs_.workers = std::move(next);
  ++needs_.revision;
}

std::optional<ResourceNeed> JobControlLoop::NeedOf(int worker, const ResourceNeed* listed,
                                                   double typical) {
  NeedHold& hold = need_holds_[static_cast<size_t>(worker)];
  const detect::WorkerView v = detector_.View(worker);
  const bool contended = amp_.Enabled(worker) && StillContended(worker, typical);
  if (v.straggler || contended) {
    hold.quiet = 0;
  } else if (listed) {
    ++hold.quiet;
  }
  if (v.straggler && (!listed || listed->cause != v.cause)) {
    if (!listed) Reenter(hold);
    if (v.cause == api::StragglerCause::kCommunication) {
      hold.release_rounds = std::max(hold.release_rounds, 4 * options_.resource_release_rounds);
    }
    hold.since_round = rounds_;
    hold.unmet = false;
    return ResourceNeed{worker, v.cause, v.slowdown};
  }
  if (listed) {
    if (hold.quiet >= hold.release_rounds) {
      hold.released = true;
      hold.given_back_round = listed->cause == api::StragglerCause::kCommunication ? rounds_ : -1;
      return std::nullopt;
    }
    return *listed;
  }
  if (contended) {
    Reenter(hold);
    hold.since_round = rounds_;
    hold.unmet = false;
    return ResourceNeed{worker, api::StragglerCause::kCompute, AmpEquivalentSlowdown(worker, typical)};
  }
  return std::nullopt;
}

void JobControlLoop::NoteUnmetNeeds(int64_t revision, const std::vector<int>& workers) {
  if (revision != needs_.revision) return;
  for (int w : workers) {
    if (w < 0 || w >= n_) continue;
    bool& unmet = need_holds_[static_cast<size_t>(w)].unmet;
    if (!unmet && detector_.View(w).straggler) unmet_news_ = true;
    unmet = true;
  }
}

bool JobControlLoop::RecentlyGivenBack(int worker) const {
  // Within two detection windows of the give-back, a slow link coming back is the
  // contention that was there before (the give-back was a probe), and is judged as such.
  const NeedHold& hold = need_holds_[static_cast<size_t>(worker)];
  return hold.released && hold.given_back_round >= 0 &&
         rounds_ - hold.given_back_round <= 2 * spec_.mitigation.detection.window;
}

void JobControlLoop::Reenter(NeedHold& hold) const {
  // Back after a release: what it was given was what kept it well (its contention
  // outlasted the hold), so the next hold is twice as long, up to 16 x the first.
  if (hold.released) {
    hold.release_rounds = std::min(2 * hold.release_rounds, 16 * options_.resource_release_rounds);
  }
  hold.released = false;
  hold.quiet = 0;
}

}  // namespace star::op
