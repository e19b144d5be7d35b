// Injector: applies and lifts the run's --inject contention at their times, through the
// sandbox's Host (see runtime.h for what each kind does), and the CPU quota arithmetic
// every cgroup of the run shares.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "local/inject_spec.h"
#include "local/run_event.h"
#include "local/sandbox.h"
#include "star/core/status.h"

namespace star::local {

// A short CFS period: with 100 ms, a worker limited to a fraction of a CPU runs in bursts
// and an iteration of tens of milliseconds waits for the next period (jitter of a whole
// period); 20 ms keeps that jitter small.
constexpr int64_t kCfsPeriodUs = 20000;
// The CFS quota per kCfsPeriodUs of `millicores`.
constexpr int64_t QuotaUs(int64_t millicores) { return millicores * kCfsPeriodUs / 1000; }

struct ActiveInjection {
  Injection spec;
  bool applied = false;
  bool lifted = false;
  bool available = true;
  std::vector<int> procs;  // its processes' handles (InjectorOptions::start_neighbor)
};

// The uplink share of bwneighbor `in` on its worker's slot while the neighbor holds
// `neighbor_bps`: its link, and its traffic's destination (the peer slot's address).
UplinkShare BwNeighborShare(const Sandbox& sandbox, int peer_slot, const Injection& in,
                            int64_t neighbor_bps);
// The uplink share of bandwidth-with-peer `in` on one end of its link, whose uplink is
// `link_bps`: the traffic to the other end's slot `other_slot` held to in.bandwidth_bps.
UplinkShare PeerLinkShare(const Sandbox& sandbox, int other_slot, const Injection& in,
                          int64_t link_bps);
// The uplink of a worker without a co-located sender (only the link's rate).
inline UplinkShare PlainUplink(int64_t link_bps) { return UplinkShare{link_bps, 0, ""}; }

struct InjectorOptions {
  Sandbox* sandbox = nullptr;    // required; slot of worker w = servers + w
  int servers = 0;               // parameter servers (the first slots)
  int workers = 0;               // workers (the slots after the servers)
  int64_t worker_millicores = 0; // a worker slot's CPU capacity
  // The slot whose namespace a bwneighbor's traffic goes to (its sink's); required when
  // an injection is kBwNeighbor.
  int peer_slot = -1;
  // Starts the processes of injection `in`: the busy neighbor (kNeighbor) in its slot's
  // neighbor cgroup, or the bwneighbor's sink and sender (kBwNeighbor); returns handles
  // for stop_neighbor. Required when an injection is kNeighbor or kBwNeighbor.
  std::function<StatusOr<std::vector<int>>(const Injection& in)> start_neighbor;
  // Stops (and reaps) the process with handle `proc`.
  std::function<void(int proc)> stop_neighbor;
  // Records "inject" and "lift" (worker: the injection's; detail: its text). Required.
  RunEventSink event;
  // A note for the user (optional).
  std::function<void(const std::string&)> notice;
};

class Injector {
 public:
  // Bandwidth and delay injections are unavailable (noticed, skipped) without network.
  Injector(InjectorOptions options, const std::vector<Injection>& injections);

  // Applies every available injection whose start is due at run time `t` and lifts every
  // applied one whose end is due. With a bwneighbor among them, the first Tick first gives
  // every worker's slot an uplink of the bwneighbor's link rate (each worker on a node with
  // such a NIC), and a lifted bwneighbor leaves its worker that plain uplink. A bandwidth
  // with a peer gives both its workers' slots PeerLinkShare (each naming the other, on an
  // uplink of that rate, else kDefaultLinkBps) and, lifted, the uplink they had before
  // (that plain uplink, or none); at the run's end the sandbox's teardown removes it with
  // the namespaces. An injection the host says is Unavailable (e.g. no netem) is skipped
  // with a notice. Other errors are returned, prefixed with
  // `--inject "<text>"`; the injections after it wait for the next Tick.
  [[nodiscard]] Status Tick(double t);

  std::vector<ActiveInjection>& injections() { return injections_; }
  const std::vector<ActiveInjection>& injections() const { return injections_; }

 private:
  Status Apply(ActiveInjection& a);
  Status Lift(ActiveInjection& a);
  void Notice(const std::string& s) const {
    if (o_.notice) o_.notice(s);
  }

  InjectorOptions o_;
  Status ShapeUplinks();
  Status ShapePeerLink(const Injection& in);
  Status RestorePeerLink(const Injection& in);
  // The workers' uplink rate: a bwneighbor's link, else kDefaultLinkBps.
  int64_t link_bps() const { return uplink_bps_ > 0 ? uplink_bps_ : kDefaultLinkBps; }

  std::vector<ActiveInjection> injections_;
  int64_t uplink_bps_ = 0;  // the workers' uplinks (a bwneighbor's link); 0 = unshaped
  bool uplinks_shaped_ = false;
};

}  // namespace star::local
