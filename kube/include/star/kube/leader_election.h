// LeaderElector: leader election on a coordination.k8s.io/v1 Lease.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "star/kube/client.h"

namespace star::kube {

// Leader election on a coordination.k8s.io/v1 Lease (client-go's resourcelock): acquire
// when the lease is absent, held by us, free (holderIdentity ""), or expired: held by
// someone else whose record this process has seen unchanged for the lease's
// leaseDurationSeconds (measured on the local monotonic clock, as client-go does, so clock
// skew between nodes cannot steal a live lease; renewTime is written for people). Renew
// every `renew_period`; retry every `retry_period` while not leading or after a failed
// renewal. Leading ends (on_stopped_leading) when another holder is seen or no renewal
// succeeded for 2/3 of lease_duration (the renew deadline: checked before each attempt and
// woken for, so before another elector may take the lease). Callbacks run on the elector's thread and must not
// block. Stop(): joins the thread, then, if leading, calls on_stopped_leading and releases
// the lease (holder "", so another elector takes it at once). An empty identity becomes
// hostname_pid. Requests go through a connection of its own made from client->options(),
// without retries and with a request timeout of at most half of (renew deadline -
// renew_period), at least 100 ms, so that a renewal started on time ends by the deadline.
struct LeaderElectionOptions {
  std::string ns = "default";
  std::string name = "star-operator";
  std::string identity;  // required, unique per process (e.g. hostname_pid)
  std::chrono::seconds lease_duration{15};
  std::chrono::seconds renew_period{5};
  std::chrono::milliseconds retry_period{2000};
};

class LeaderElector {
 public:
  LeaderElector(Client* client, LeaderElectionOptions options,
                std::function<void()> on_started_leading, std::function<void()> on_stopped_leading);
  ~LeaderElector();  // Stop(): releases the lease if held (sets holder empty)
  void Start();
  void Stop();
  bool leading() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace star::kube
