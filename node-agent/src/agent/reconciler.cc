#include "star/agent/reconciler.h"

#include <algorithm>
#include <map>
#include <set>
#include <thread>
#include <utility>

namespace star::agent {
namespace {

const Status& StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const StatusOr<T>& s) { return s.status(); }

std::string PodLabel(const api::PodAllocation& p) {
  return p.namespace_ + "/" + p.name + " (" + p.uid + ")";
}

// One pod's plan: what to write (if anything) and what to journal first.
struct PodPlan {
  size_t result_index = 0;
  std::string cgroup;
  std::optional<CpuLimits> observed_cpu;
  std::optional<CpuLimits> write_cpu;  // set iff it differs from observed
  std::string interface;
  std::optional<NetLimits> observed_net;
  std::optional<NetLimits> write_net;
  // The journalled interface this pod no longer maps to: its original comes back first.
  std::optional<NetOriginal> stale_net;
};

}  // namespace

std::string_view PodActionName(PodAction a) {
  switch (a) {
    case PodAction::kUnchanged: return "unchanged";
    case PodAction::kApplied: return "applied";
    case PodAction::kRestored: return "restored";
    case PodAction::kFailed: return "failed";
  }
  return "unknown";
}

bool ReconcileResult::all_ok() const {
  return std::all_of(pods.begin(), pods.end(), [](const PodResult& p) { return p.status.ok(); });
}

CpuLimits DesiredCpu(const api::CpuAllocation& cpu, int64_t period_us) {
  CpuLimits l;
  l.period_us = period_us;
  l.weight = cpu.weight;
  l.quota_us = cpu.quota_millicores == 0
                   ? -1
                   : std::max<int64_t>(1000, cpu.quota_millicores * period_us / 1000);
  return l;
}

NetLimits DesiredNet(const api::NetworkAllocation& net) {
  // As an interface can hold it: tc rates are whole bytes per second, and without a rate
  // there is no class to carry a priority.
  NetLimits l{net.egress_bits_per_second / 8 * 8, net.ingress_bits_per_second / 8 * 8,
              net.priority};
  if (l.egress_bits_per_second == 0 && l.ingress_bits_per_second == 0) l.priority = 0;
  return l;
}

Reconciler::Reconciler(NodeOs& os, Journal& journal, ReconcilerOptions options)
    : os_(os), journal_(journal), options_(std::move(options)) {
  options_.max_attempts = std::max(1, options_.max_attempts);
  if (!options_.sleep) {
    options_.sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  }
}

template <typename F>
auto Reconciler::Retry(F&& f) -> decltype(f()) {
  auto backoff = options_.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    auto r = f();
    if (StatusOf(r).ok() || !IsTransient(StatusOf(r)) || attempt >= options_.max_attempts) return r;
    options_.sleep(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

StatusOr<ReconcileResult> Reconciler::ReleaseAll() {
  api::NodeAllocation none;
  none.name = "release";
  return Reconcile(none);
}

StatusOr<ReconcileResult> Reconciler::Reconcile(const api::NodeAllocation& desired,
                                                const InterfaceMap& interfaces) {
  // 1. Validate everything before touching anything.
  STAR_RETURN_IF_ERROR(CheckCgroupRoot(options_.cgroup_root, "cgroup_root"));
  STAR_RETURN_IF_ERROR(api::Validate(desired.spec));
  std::set<std::string> desired_uids;
  std::map<std::string, std::string> pod_of_interface;
  for (size_t i = 0; i < desired.spec.pods.size(); ++i) {
    const auto& p = desired.spec.pods[i];
    const std::string field = "spec.pods[" + std::to_string(i) + "].uid";
    STAR_RETURN_IF_ERROR(CheckPodUid(p.uid, field));
    desired_uids.insert(p.uid);
    auto it = interfaces.find(p.uid);
    if (it == interfaces.end()) continue;
    STAR_RETURN_IF_ERROR(CheckInterfaceName(it->second, "interface of pod " + p.uid));
    auto [prev, inserted] = pod_of_interface.emplace(it->second, p.uid);
    if (!inserted) {
      return Status::InvalidArgument("interface " + it->second + ": mapped to pods " +
                                     prev->second + " and " + p.uid);
    }
  }

  ReconcileResult result;
  std::vector<PodPlan> plans;
  std::vector<std::string> violations;
  auto fail = [&](size_t idx, Status s) {
    result.pods[idx].action = PodAction::kFailed;
    if (result.pods[idx].status.ok()) result.pods[idx].status = std::move(s);
  };

  // 2-3. Plan (reads only) and check guarantees.
  for (const auto& p : desired.spec.pods) {
    PodResult r;
    r.uid = p.uid;
    r.namespace_ = p.namespace_;
    r.name = p.name;
    r.cpu = p.cpu;
    r.network = p.network;
    result.pods.push_back(std::move(r));
    const size_t idx = result.pods.size() - 1;
    const JournalEntry* journalled = journal_.Find(p.uid);

    auto resolved = Retry(
        [&] { return ResolvePodCgroup(os_, options_.driver, p.uid, options_.cgroup_root); });
    if (!resolved.ok()) {
      fail(idx, resolved.status());
      continue;
    }
    PodPlan plan;
    plan.result_index = idx;
    plan.cgroup = resolved->cgroup;
    result.pods[idx].cgroup = plan.cgroup;
    auto cpu = Retry([&] { return os_.ReadCpu(plan.cgroup); });
    if (!cpu.ok()) {
      fail(idx, cpu.status());
      continue;
    }
    plan.observed_cpu = *cpu;
    const CpuLimits want = DesiredCpu(p.cpu, cpu->period_us);
    if (!(want == *cpu)) plan.write_cpu = want;

    const CpuLimits original =
        journalled && journalled->cpu ? journalled->cpu->limits : *cpu;
    if (p.guaranteed && original.quota_us > 0 && p.cpu.quota_millicores > 0 &&
        p.cpu.quota_millicores * original.period_us < original.quota_us * 1000) {
      violations.push_back("guaranteed pod " + PodLabel(p) + " would get " +
                           std::to_string(p.cpu.quota_millicores) +
                           " millicores, below its request of " +
                           std::to_string(original.quota_us * 1000 / original.period_us) +
                           " millicores");
    }

    if (auto it = interfaces.find(p.uid); it != interfaces.end()) {
      plan.interface = it->second;
      result.pods[idx].interface = plan.interface;
      auto net = Retry([&] { return os_.ReadNet(plan.interface); });
      if (!net.ok()) {
        fail(idx, net.status().WithPrefix("interface " + plan.interface));
        continue;
      }
      plan.observed_net = *net;
      const NetLimits want_net = DesiredNet(p.network);
      if (!(want_net == *net)) plan.write_net = want_net;
    }
    if (journalled && journalled->net && journalled->net->interface != plan.interface) {
      plan.stale_net = journalled->net;
    }
    plans.push_back(std::move(plan));
  }
  if (!violations.empty()) {
    std::string msg = "allocation refused: ";
    for (size_t i = 0; i < violations.size(); ++i) msg += (i ? "; " : "") + violations[i];
    return Status::InvalidArgument(msg);
  }

  // 4a. Journal the originals of everything about to change, in one atomic write.
  std::map<std::string, std::optional<JournalEntry>> record;
  for (const auto& plan : plans) {
    const std::string& uid = result.pods[plan.result_index].uid;
    const JournalEntry* old = journal_.Find(uid);
    JournalEntry e = old ? *old : JournalEntry{};
    if (plan.write_cpu && !e.cpu) e.cpu = CpuOriginal{plan.cgroup, *plan.observed_cpu};
    if (plan.write_net && (!e.net || e.net->interface != plan.interface) && !plan.stale_net) {
      e.net = NetOriginal{plan.interface, *plan.observed_net};
    }
    if (old ? !(e == *old) : (e.cpu || e.net)) record[uid] = e;
  }
  STAR_RETURN_IF_ERROR(journal_.Commit(record));

  // 4b. Restore journalled pods that left the allocation (and stale interfaces).
  std::map<std::string, std::optional<JournalEntry>> forget;
  auto restore_net = [&](const NetOriginal& o) -> Status {
    auto exists = Retry([&] { return os_.InterfaceExists(o.interface); });
    if (!exists.ok()) return exists.status();
    if (!*exists) return Status::Ok();  // gone with its pod: nothing to restore
    auto net = Retry([&] { return os_.ReadNet(o.interface); });
    if (!net.ok()) return net.status();
    if (*net == o.limits) return Status::Ok();
    STAR_RETURN_IF_ERROR(Retry([&] { return os_.WriteNet(o.interface, o.limits); }));
    ++result.writes;
    return Status::Ok();
  };
  auto restore_cpu = [&](const CpuOriginal& o) -> Status {
    auto exists = Retry([&] { return os_.CgroupExists(o.cgroup); });
    if (!exists.ok()) return exists.status();
    if (!*exists) return Status::Ok();
    auto cpu = Retry([&] { return os_.ReadCpu(o.cgroup); });
    if (!cpu.ok()) return cpu.status();
    if (*cpu == o.limits) return Status::Ok();
    STAR_RETURN_IF_ERROR(Retry([&] { return os_.WriteCpu(o.cgroup, o.limits); }));
    ++result.writes;
    return Status::Ok();
  };
  for (const auto& [uid, entry] : journal_.entries()) {
    if (desired_uids.count(uid)) continue;
    PodResult r;
    r.uid = uid;
    r.in_allocation = false;
    r.action = PodAction::kRestored;
    if (entry.cpu) r.cgroup = entry.cpu->cgroup;
    if (entry.net) r.interface = entry.net->interface;
    Status s = entry.cpu ? restore_cpu(*entry.cpu) : Status::Ok();
    if (s.ok() && entry.net) s = restore_net(*entry.net);
    if (s.ok()) {
      forget[uid] = std::nullopt;
    } else {
      r.action = PodAction::kFailed;
      r.status = s;
    }
    result.pods.push_back(std::move(r));
  }

  // 4c. Write what differs.
  for (const auto& plan : plans) {
    PodResult& r = result.pods[plan.result_index];
    if (plan.stale_net) {
      Status s = restore_net(*plan.stale_net);
      if (!s.ok()) {
        fail(plan.result_index, s.WithPrefix("restoring interface " + plan.stale_net->interface));
        continue;
      }
      JournalEntry e = *journal_.Find(r.uid);
      e.net = plan.write_net ? std::optional<NetOriginal>(NetOriginal{plan.interface,
                                                                      *plan.observed_net})
                             : std::nullopt;
      if (!e.cpu && !e.net) {
        forget[r.uid] = std::nullopt;
      } else {
        // The new interface's original must be durable before it is changed.
        Status js = journal_.Commit({{r.uid, e}});
        if (!js.ok()) {
          fail(plan.result_index, js);
          continue;
        }
      }
    }
    if (plan.write_cpu) {
      Status s = Retry([&] { return os_.WriteCpu(plan.cgroup, *plan.write_cpu); });
      if (!s.ok()) {
        fail(plan.result_index, s.WithPrefix("cgroup " + plan.cgroup));
        continue;
      }
      ++result.writes;
      r.action = PodAction::kApplied;
    }
    if (plan.write_net) {
      Status s = Retry([&] { return os_.WriteNet(plan.interface, *plan.write_net); });
      if (!s.ok()) {
        fail(plan.result_index, s.WithPrefix("interface " + plan.interface));
        continue;
      }
      ++result.writes;
      r.action = PodAction::kApplied;
    }
  }

  // 4d. Forget what was restored, only now that it is. If the journal cannot be written
  // the entries stay, and the next pass finds the originals in place and forgets them then.
  if (Status js = journal_.Commit(forget); !js.ok()) {
    for (PodResult& r : result.pods) {
      if (!r.in_allocation && r.action == PodAction::kRestored) {
        r.action = PodAction::kFailed;
        r.status = js;
      }
    }
  }
  return result;
}

}  // namespace star::agent
