// Internal: how the groups of a groups-mode job learn that one of them reached the
// iteration of a decision that leaves groups, so that every group merges at its next
// iteration boundary instead of running on to that iteration number.
//
// Each group's leader (its lowest rank) listens, on a thread, for one "ready" message from
// every other group's leader; a leader sends its own when its group merges. heard() turns
// true at the first message: the leader then flags it in its group's next all-reduce.
//
// The one exception to Collective's one-thread rule, confined to a communicator of its
// own: the thread receives while the owner's thread sends its ready messages (Gloo's
// unbound buffers and LocalCollective both allow a Send and a receive at once).
//
// Limit: the thread listens from when the exit decision is known until every other leader
// sent; a receive fails after the communicator's timeout, so the first group must reach
// the decision's iteration within one timeout of this leader learning of it (the
// operator's margin is a few of the slowest worker's iterations).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "star/core/status.h"
#include "star/shim/collective.h"

namespace star::shim::internal {

class MergeSignals {
 public:
  // Starts listening on `comm` (a communicator no other thread receives on) for one
  // message with `tag` from each of `leaders` (the other groups' leaders, not empty).
  MergeSignals(Collective* comm, std::vector<int> leaders, uint32_t tag);
  // Joins the thread: it ends once every other leader sent its message (or the
  // communicator's timeout passed).
  ~MergeSignals();
  MergeSignals(const MergeSignals&) = delete;
  MergeSignals& operator=(const MergeSignals&) = delete;

  bool heard() const { return heard_.load(); }
  // Tells every other leader that this group merges now (once).
  Status SendReady();
  // Waits for the thread; its receive error, if any.
  Status Join();

 private:
  void Run();

  Collective* comm_;
  std::vector<int> leaders_;
  uint32_t tag_;
  std::atomic<bool> heard_{false};
  bool sent_ = false;
  Status error_;
  std::thread thread_;
};

}  // namespace star::shim::internal
