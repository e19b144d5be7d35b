#include "star/agent/headroom_reporter.h"

#include <utility>

#include "star/kube/time.h"

namespace star::agent {

HeadroomReporter::HeadroomReporter(HeadroomConfig config) : config_(std::move(config)) {
  if (config_.nic_capacity_bits_per_second <= 0 && !config_.interface.empty()) {
    config_.nic_capacity_bits_per_second =
        LinkSpeedBitsPerSecond(config_.paths, config_.interface).value_or(0);
  }
}

Status HeadroomReporter::Tick(K8sSource& source) {
  // The loop passes far more often than a sample is due: nothing is read before then.
  if (base_ && std::chrono::steady_clock::now() - base_->at < config_.options.interval) {
    return Status();
  }
  auto now = ReadHostCounters(config_.paths, config_.interface);
  if (!now.ok()) return now.status().WithPrefix("headroom");
  if (!base_) {
    base_ = *now;
    return Status();
  }
  sample_ = HeadroomBetween(*base_, *now, config_.interface, config_.nic_capacity_bits_per_second,
                            kube::NowRfc3339());
  base_ = *now;
  if (!ShouldWriteHeadroom(written_, written_at_, *sample_, now->at, config_.options)) {
    return Status();
  }
  if (Status s = source.ReportHeadroom(*sample_); !s.ok()) return s;
  written_ = sample_;
  written_at_ = now->at;
  return Status();
}

}  // namespace star::agent
