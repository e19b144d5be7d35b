#include "sim/progress.h"

namespace star::sim {

void Progress::Update(double time, double effective_samples) {
  ++updates_;
  worth_ += Worth(effective_samples + carry_);
  carry_ = 0;
  if (!tta_ && worth_ >= min_updates_) tta_ = time;
}

}  // namespace star::sim
