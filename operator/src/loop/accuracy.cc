// The job's accuracy curve and time to accuracy (control_loop.h, "Accuracy").
#include "star/operator/control_loop.h"

namespace star::op {

Status JobControlLoop::ObserveAccuracy(double t, double accuracy) {
  STAR_RETURN_IF_ERROR(CheckAccuracy(t, accuracy));
  RecordAccuracy(t, accuracy);
  return Status::Ok();
}

void JobControlLoop::RecordAccuracy(double t, double accuracy) {
  accuracy_curve_.emplace_back(t, accuracy);
  const std::optional<double>& target = spec_.training.target_accuracy;
  if (tta_ || !target || accuracy < *target) return;
  tta_ = t;
  timeline_.push_back(MakeTargetReachedEvent(t, {accuracy, *target}));
}

}  // namespace star::op
