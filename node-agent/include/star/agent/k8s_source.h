// K8sSource: the node agent's desired state from the Kubernetes API. It watches the
// cluster-scoped NodeAllocation named after the node (a kube::Informer with the field
// selector metadata.name=<node>: list + watch, re-listing after 410 Gone or any error) and
// hands the agent's loop
// the same DesiredState a FileSource does; the loop reports each reconcile back with
// ReportStatus, which writes the object's status through the /status subresource.
//
// Desired state, by what the API server says:
//   - the object exists and decodes (DesiredStateFromJson): that allocation;
//   - it exists but does not decode: the last good allocation stays in force, Poll reports
//     the error (naming the field) and the status gets Valid=False;
//   - it does not exist (deleted, or never created) according to a successful list or a
//     DELETED event: released() -- the loop restores every journalled original
//     (Reconciler::ReleaseAll). This differs from FileSource, which keeps the last good
//     allocation when its file disappears: a missing file is an accident, a deleted object
//     is the controller's decision.
//   - nothing known yet (not synced, or the API server unreachable from the start):
//     neither desired() nor released(); nothing is done.
//
// Status written (merge patch of the whole status but usage, only when it differs from
// what this source last wrote for this object, so at most once per change):
//   observedGeneration  metadata.generation of the spec in force (accepted by the reconciler)
//   applied[]           the pods of that spec whose limits are in force
//   conditions          Valid   (False/InvalidSpec: the newest spec does not decode)
//                       Applied (True/Applied, False/PodsFailed, False/Refused, False/NoValidSpec)
//                       Ready   (True iff Valid and Applied are True)
//                       NetworkShaped (after a reconcile: True/InterfacesFound, or
//                               False/InterfaceNotFound naming each pod whose interface
//                               was not found and why; such a pod is not failed, its
//                               applied[] entry carries no network, and it is retried)
//   usage               not written (no usage sampling yet)
//   headroom            only by ReportHeadroom (star/agent/headroom.h says how often).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "star/agent/allocation_source.h"
#include "star/agent/reconciler.h"
#include "star/core/api/node_allocation.h"
#include "star/core/status.h"
#include "star/kube/client.h"
#include "star/kube/informer.h"

namespace star::agent {

// The informer's options (kube::InformerOptions: watch_timeout, relist_backoff and
// max_relist_backoff).
struct K8sSourceOptions {
  // Server-side timeout of one watch request; the source re-watches from the last
  // resourceVersion it saw. Default 300 s.
  std::chrono::seconds watch_timeout{300};
  // Wait before re-listing after an error (or after a watch that ended early without any
  // event), doubling up to max_backoff. Defaults 200 ms and 10 s.
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{10000};
};

// What ReportStatus computes, exposed for tests. `previous` is the status last written
// (its conditions' lastTransitionTime are kept while their status does not change).
struct StatusInputs {
  int64_t generation = 0;             // metadata.generation of the newest object
  Status decode_error;                // non-OK: the newest object does not decode
  bool have_desired = false;          // a good spec is in force
  int64_t desired_generation = 0;     // its generation
  const StatusOr<ReconcileResult>* result = nullptr;  // the last reconcile of it, if any
  std::string now;                    // RFC 3339, for lastTransitionTime
};
[[nodiscard]] api::NodeAllocationStatus BuildStatus(const StatusInputs& in,
                                                    const api::NodeAllocationStatus& previous);

// Poll, desired, released and ReportStatus belong to one thread (the agent's loop); the
// watch runs on the informer's thread. Borrows `client`, which must outlive it.
class K8sSource {
 public:
  K8sSource(kube::Client& client, std::string node, K8sSourceOptions options = {});
  ~K8sSource();  // Stop()
  K8sSource(const K8sSource&) = delete;
  K8sSource& operator=(const K8sSource&) = delete;

  // Starts / stops the list+watch thread. Stop is idempotent and returns once the thread
  // has ended (an open watch ends when the client notices its stop flag). Start after
  // Stop does nothing.
  void Start();
  void Stop();
  // Blocks until the first list succeeded (true) or `timeout` passed (false).
  bool WaitForSync(std::chrono::milliseconds timeout);
  // Blocks until the watch saw something Poll has not taken yet (true) or `timeout`
  // passed (false). For the loop's thread.
  bool WaitForUpdate(std::chrono::milliseconds timeout);

  // Takes what the watch saw since the last call. Returns true when the desired state
  // changed (a new good spec, or the object disappeared), false when nothing changed.
  // Errors, repeated until the object or the connection changes, leave the desired state
  // as it was: InvalidArgument "nodeallocation <node>: <field>: ..." for an object that
  // does not decode; the last list error (Unavailable, ...) while the API server cannot
  // be listed.
  [[nodiscard]] StatusOr<bool> Poll();

  // The spec in force; nullopt when there is none (not synced, released, or no good
  // spec seen yet).
  const std::optional<DesiredState>& desired() const { return desired_; }
  // True once the API server said the object does not exist (see the file comment).
  bool released() const { return released_; }

  // Records the outcome of reconciling desired() (`result` may be null when there was
  // nothing to reconcile) and writes the status when it differs from what was last written
  // for this object. OK when written or nothing to write (no object, or unchanged); the
  // client's error otherwise (retried on the next call).
  [[nodiscard]] Status ReportStatus(const StatusOr<ReconcileResult>* result);

  // Writes the node's headroom into status.headroom, a merge patch of that field alone
  // (ReportStatus never touches it). OK when written or when there is no object to write
  // to (the operator creates it); the client's error otherwise.
  [[nodiscard]] Status ReportHeadroom(const api::NodeHeadroom& headroom);

  // Status patches sent successfully (tests).
  int64_t status_writes() const { return status_writes_; }
  int64_t headroom_writes() const { return headroom_writes_; }

 private:
  // The informer's reports: something changed (an event, or a list's outcome).
  void OnEvent();
  void OnList(const Status& outcome);
  // Poll's reading of the informer's cache, given the last list error.
  StatusOr<bool> Take(const Status& list_error);
  bool TakeAbsent();                                  // true when that changed desired
  StatusOr<bool> TakePresent(nlohmann::json object);  // likewise, or the decode error

  kube::Client& client_;
  const std::string node_;

  // Written by the informer's thread, read by Poll.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Status list_error_;     // the last list's error; OK after a successful list
  uint64_t version_ = 0;  // bumped on every event and list outcome that may change Poll
  bool synced_ = false;   // a list succeeded (and version_ counts it)

  // The loop's view (Poll / ReportStatus).
  uint64_t seen_version_ = 0;
  Status seen_status_;
  std::optional<DesiredState> desired_;
  bool released_ = false;
  std::optional<nlohmann::json> current_;  // the newest object, when present
  Status decode_error_;
  std::string object_uid_;                 // metadata.uid of current_
  std::optional<api::NodeAllocationStatus> written_;  // last status written for object_uid_
  int64_t status_writes_ = 0;
  int64_t headroom_writes_ = 0;

  kube::Informer informer_;  // last: it stops (and stops calling back) before the rest goes
};

}  // namespace star::agent
