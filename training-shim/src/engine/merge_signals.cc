#include "engine/merge_signals.h"

#include <algorithm>
#include <string>
#include <utility>

namespace star::shim::internal {

MergeSignals::MergeSignals(Collective* comm, std::vector<int> leaders, uint32_t tag)
    : comm_(comm), leaders_(std::move(leaders)), tag_(tag) {
  thread_ = std::thread(&MergeSignals::Run, this);
}

MergeSignals::~MergeSignals() { (void)Join(); }

void MergeSignals::Run() {
  std::vector<int> remaining = leaders_;
  float msg = 0;
  while (!remaining.empty()) {
    StatusOr<int> from = comm_->RecvFromAny(&msg, 1, remaining, tag_);
    if (!from.ok()) {
      error_ = from.status().WithPrefix("groups leader listening for a group that reached a switch");
      return;
    }
    heard_.store(true);
    remaining.erase(std::find(remaining.begin(), remaining.end(), *from));
  }
}

Status MergeSignals::SendReady() {
  if (sent_) return Status::Ok();
  sent_ = true;
  const float ready = 1.0f;
  for (int leader : leaders_) {
    STAR_RETURN_IF_ERROR(comm_->Send(&ready, 1, leader, tag_)
                             .WithPrefix("groups leader telling leader " + std::to_string(leader) +
                                         " to merge"));
  }
  return Status::Ok();
}

Status MergeSignals::Join() {
  if (thread_.joinable()) thread_.join();
  return error_;
}

}  // namespace star::shim::internal
