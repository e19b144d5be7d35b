// Reconciler: makes the node's cgroups and interfaces match a NodeAllocation, level-based
// (every call re-reads the observed state and converges from wherever it is).
//
// One Reconcile(desired):
//   1. Validates the whole allocation (api::Validate, the agent's own bounds of
//      quantity.h, pod uids, the interface mapping). Invalid input: InvalidArgument
//      naming the field, nothing is read or changed.
//   2. Plans every pod: finds its cgroup (pod_cgroup.h), reads the observed limits and
//      computes the desired ones: quota_us = quotaMillicores * period_us / 1000 (at least
//      1000 us, the kernel's minimum, at most kMaxQuotaUs, computed without overflow for
//      any int64; 0 millicores = unlimited, -1), the observed period
//      is kept, weight = cpu.weight; NetLimits = the pod's network allocation, applied to
//      the pod's host-side interface. Which interface: the one `interfaces` maps the pod
//      to (an explicit override), else the one NodeOs::PodInterface finds from the pod's
//      network namespace, asked only when the pod is to be shaped (or, after a lost
//      journal, may be). When it cannot be found (no process yet, a host-network pod, the
//      interface gone, an interface already another pod's) the pod's network is skipped
//      for this pass: PodResult::network_skipped says why, its CPU is still applied, no
//      interface is touched (an interface journalled for it keeps what it has), and the
//      next pass looks again.
//   3. Guarantees: a guaranteed pod's request is its original CPU quota (the journalled
//      original, else the observed quota; kubelet sets quota = limit = request for
//      Guaranteed pods). A plan giving a guaranteed pod a finite quota below that is
//      refused: InvalidArgument naming the pods, nothing changed. (An unlimited original
//      quota is no known request and is not checked.)
//   4. Journals the originals of everything about to change (one atomic journal write),
//      then writes what differs, restores the originals of journalled pods that left the
//      allocation, and removes their journal entries once restored.
// Transient NodeOs errors (Unavailable, Aborted, DeadlineExceeded) are retried with
// exponential backoff; other errors, and transient ones that outlast the retries, fail
// that pod only (reported in its PodResult; the next Reconcile tries again).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "star/agent/journal.h"
#include "star/agent/node_os.h"
#include "star/agent/pod_cgroup.h"
#include "star/core/api/node_allocation.h"
#include "star/core/status.h"

namespace star::agent {

struct ReconcilerOptions {
  CgroupDriver driver = CgroupDriver::kCgroupfs;  // default: cgroupfs
  // The kubelet's --cgroup-root as a relative path; pods live under <root>/kubepods...
  // Default "": the hierarchy root.
  std::string cgroup_root;
  // Attempts per NodeOs call for transient errors (>= 1). Default 5.
  int max_attempts = 5;
  // Backoff before the 2nd attempt, doubled each time up to max_backoff.
  // Defaults: 10 ms and 1 s.
  std::chrono::milliseconds initial_backoff{10};
  std::chrono::milliseconds max_backoff{1000};
  // How to wait between attempts. Default (empty): std::this_thread::sleep_for. Tests
  // inject a recorder so that no test really sleeps.
  std::function<void(std::chrono::milliseconds)> sleep;
  // Journal an interface's original as unshaped (no limits, which removes the agent's
  // qdiscs and IFB device on restore) instead of what it shows, also when it already shows
  // its allocation. Set once the journal was lost: what an interface shows may then be the
  // agent's own earlier shaping. Default false.
  bool unshaped_net_originals = false;
};

enum class PodAction {
  kUnchanged,  // observed already matched (or nothing to restore)
  kApplied,    // desired limits written
  kRestored,   // left the allocation: originals written back, journal entry removed
  kFailed,     // see status
};
std::string_view PodActionName(PodAction a);

struct PodResult {
  std::string uid;
  std::string namespace_;  // empty for a pod only known from the journal
  std::string name;
  PodAction action = PodAction::kUnchanged;
  Status status;           // non-OK iff action == kFailed
  std::string cgroup;      // "" when not resolved
  std::string interface;   // "" when the pod has none
  bool interface_discovered = false;  // found by NodeOs::PodInterface, not given
  // Non-OK when the pod's shaping was skipped because its interface was not found (see
  // the file comment); the pod is not failed for it.
  Status network_skipped;
  api::CpuAllocation cpu;  // the desired allocation (pods in the allocation)
  api::NetworkAllocation network;
  bool in_allocation = true;  // false: a journalled pod being restored
};

struct ReconcileResult {
  std::vector<PodResult> pods;  // allocation pods in order, then restored pods by uid
  int64_t writes = 0;           // successful WriteCpu / WriteNet calls
  bool all_ok() const;
};

// Not thread-safe: call from one thread. Borrows `os` and `journal`, which must outlive it.
class Reconciler {
 public:
  Reconciler(NodeOs& os, Journal& journal, ReconcilerOptions options = {});

  // See the file comment. Returns an error only when the whole allocation is refused
  // (InvalidArgument: validation or a guarantee) or the originals cannot be journalled
  // (the journal's error); nothing is changed in either case. Per-pod failures are in
  // the result.
  // `interfaces`: pod uid -> host-side interface, overriding discovery (uids not in the
  // allocation are ignored).
  [[nodiscard]] StatusOr<ReconcileResult> Reconcile(const api::NodeAllocation& desired,
                                                    const InterfaceMap& interfaces = {});

  // Restores the originals of every journalled pod (the agent was told to release the
  // node). Same as Reconcile with an empty allocation.
  [[nodiscard]] StatusOr<ReconcileResult> ReleaseAll();

 private:
  NodeOs& os_;
  Journal& journal_;
  ReconcilerOptions options_;
};

// Desired CPU limits for an allocation on a cgroup whose period is `period_us`.
CpuLimits DesiredCpu(const api::CpuAllocation& cpu, int64_t period_us);
// Rates rounded down to whole bytes per second; priority 0 when both rates are 0 (what an
// interface reads back after such a write).
NetLimits DesiredNet(const api::NetworkAllocation& net);

}  // namespace star::agent
