#include "local/injector.h"

#include <algorithm>
#include <cmath>

#include "local/format.h"

namespace star::local {

UplinkShare BwNeighborShare(const Sandbox& sandbox, int peer_slot, const Injection& in,
                            int64_t neighbor_bps) {
  return UplinkShare{in.link_bps, neighbor_bps, sandbox.slot_address(peer_slot)};
}

UplinkShare PeerLinkShare(const Sandbox& sandbox, int other_slot, const Injection& in,
                          int64_t link_bps) {
  return UplinkShare{link_bps, in.bandwidth_bps, sandbox.slot_address(other_slot)};
}

Injector::Injector(InjectorOptions options, const std::vector<Injection>& injections)
    : o_(std::move(options)) {
  for (const Injection& inj : injections) {
    ActiveInjection a;
    a.spec = inj;
    // A delay with a peer is in the stages' transport (STAR_LINK_DELAY), not in tc.
    const bool in_stages = inj.kind == InjectionKind::kDelay && inj.peer;
    if (!o_.sandbox->has_network() && !in_stages &&
        (inj.kind == InjectionKind::kBandwidth || inj.kind == InjectionKind::kDelay ||
         inj.kind == InjectionKind::kBwNeighbor)) {
      a.available = false;
      Notice("--inject \"" + inj.text + "\": unavailable without network namespaces; skipped");
    }
    if (inj.kind == InjectionKind::kBwNeighbor && a.available && uplink_bps_ == 0) {
      uplink_bps_ = inj.link_bps;
    }
    injections_.push_back(a);
  }
}

Status Injector::ShapeUplinks() {
  uplinks_shaped_ = true;
  for (int w = 0; w < o_.workers && uplink_bps_ > 0; ++w) {
    STAR_RETURN_IF_ERROR(o_.sandbox->SetUplinkShare(o_.servers + w, PlainUplink(uplink_bps_))
                             .WithPrefix("the workers' " + std::to_string(uplink_bps_) + "bit uplinks"));
  }
  return Status::Ok();
}

// Both ends first get the share naming the other; on an error neither is left shaped.
Status Injector::ShapePeerLink(const Injection& in) {
  Sandbox& sb = *o_.sandbox;
  const int slot = o_.servers + in.worker;
  const int peer = o_.servers + *in.peer;
  STAR_RETURN_IF_ERROR(sb.SetUplinkShare(slot, PeerLinkShare(sb, peer, in, link_bps())));
  if (Status s = sb.SetUplinkShare(peer, PeerLinkShare(sb, slot, in, link_bps())); !s.ok()) {
    (void)sb.SetUplinkShare(slot, PlainUplink(uplink_bps_));  // best effort; s says what failed
    return s;
  }
  return Status::Ok();
}

// Both ends get back the uplink of a worker without injections; the first error is returned.
Status Injector::RestorePeerLink(const Injection& in) {
  Sandbox& sb = *o_.sandbox;
  const Status worker = sb.SetUplinkShare(o_.servers + in.worker, PlainUplink(uplink_bps_));
  const Status peer = sb.SetUplinkShare(o_.servers + *in.peer, PlainUplink(uplink_bps_));
  return worker.ok() ? peer : worker;
}

Status Injector::Tick(double t) {
  if (!uplinks_shaped_) STAR_RETURN_IF_ERROR(ShapeUplinks());
  for (ActiveInjection& a : injections_) {
    if (!a.available) continue;
    if (!a.applied && t >= a.spec.start_seconds) {
      if (Status s = Apply(a); !s.ok()) {
        if (s.code() == StatusCode::kUnavailable) {
          // E.g. no netem in this kernel: the run goes on without this injection.
          a.available = false;
          Notice("--inject \"" + a.spec.text + "\": unavailable here (" + s.message() +
                 "); skipped");
          continue;
        }
        return s.WithPrefix("--inject \"" + a.spec.text + "\"");
      }
      o_.event({t, "inject", a.spec.worker, a.spec.text});
      Notice("injected " + a.spec.text + " at " + Fixed(t, 1) + " s");
    }
    if (a.applied && !a.lifted && a.spec.end_seconds && t >= *a.spec.end_seconds) {
      if (Status s = Lift(a); !s.ok()) return s.WithPrefix("--inject \"" + a.spec.text + "\"");
      o_.event({t, "lift", a.spec.worker, a.spec.text});
      Notice("lifted " + a.spec.text + " at " + Fixed(t, 1) + " s");
    }
  }
  return Status::Ok();
}

Status Injector::Apply(ActiveInjection& a) {
  const Injection& in = a.spec;
  const int slot = o_.servers + in.worker;
  Sandbox& sb = *o_.sandbox;
  switch (in.kind) {
    case InjectionKind::kCpu: {
      const auto mc = static_cast<int64_t>(std::llround(in.cpu_fraction * o_.worker_millicores));
      STAR_RETURN_IF_ERROR(sb.host().WriteCpu(
          sb.slot_cgroup(slot), {QuotaUs(std::max<int64_t>(mc, 10)), kCfsPeriodUs, 100}));
      break;
    }
    case InjectionKind::kNeighbor: {
      STAR_RETURN_IF_ERROR(sb.host().WriteCpu(sb.neighbor_cgroup(slot),
                                              {-1, kCfsPeriodUs, 100 * in.neighbor_threads}));
      STAR_ASSIGN_OR_RETURN(a.procs, o_.start_neighbor(in));
      break;
    }
    case InjectionKind::kBwNeighbor: {
      STAR_RETURN_IF_ERROR(
          sb.SetUplinkShare(slot, BwNeighborShare(sb, o_.peer_slot, in, in.bwneighbor_bps)));
      STAR_ASSIGN_OR_RETURN(a.procs, o_.start_neighbor(in));
      break;
    }
    case InjectionKind::kBandwidth: {
      if (in.peer) {
        STAR_RETURN_IF_ERROR(ShapePeerLink(in));
        break;
      }
      agent::NetLimits lim;
      lim.egress_bits_per_second = in.bandwidth_bps;
      lim.ingress_bits_per_second = in.bandwidth_bps;
      STAR_RETURN_IF_ERROR(sb.host().WriteNet(sb.host_ifname(slot), lim));
      break;
    }
    case InjectionKind::kDelay:
      if (!in.peer) STAR_RETURN_IF_ERROR(sb.SetDelay(slot, in.delay_seconds));  // else set at launch
      break;
  }
  a.applied = true;
  return Status::Ok();
}

Status Injector::Lift(ActiveInjection& a) {
  const Injection& in = a.spec;
  const int slot = o_.servers + in.worker;
  Sandbox& sb = *o_.sandbox;
  a.lifted = true;
  switch (in.kind) {
    case InjectionKind::kCpu:
      return sb.host().WriteCpu(sb.slot_cgroup(slot),
                                {QuotaUs(o_.worker_millicores), kCfsPeriodUs, 100});
    case InjectionKind::kNeighbor:
      for (int p : a.procs) o_.stop_neighbor(p);
      return sb.host().WriteCpu(sb.neighbor_cgroup(slot), {-1, kCfsPeriodUs, 100});
    case InjectionKind::kBwNeighbor:
      for (int p : a.procs) o_.stop_neighbor(p);
      return sb.SetUplinkShare(slot, PlainUplink(in.link_bps));
    case InjectionKind::kBandwidth:
      if (in.peer) return RestorePeerLink(in);
      return sb.host().WriteNet(sb.host_ifname(slot), agent::NetLimits{});
    case InjectionKind::kDelay:
      return in.peer ? Status::Ok() : sb.SetDelay(slot, 0);
  }
  return Status::Ok();
}

}  // namespace star::local
