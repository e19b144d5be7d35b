#include "star/agent/reconciler.h"

#include <algorithm>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "star/agent/quantity.h"

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
                   : std::clamp<int64_t>(SaturatingMul(cpu.quota_millicores, period_us) / 1000,
                                         1000, kMaxQuotaUs);
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

namespace {

template <typename F>
auto RetryWith(const ReconcilerOptions& options, F&& f) -> decltype(f()) {
  auto backoff = options.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    auto r = f();
    if (StatusOf(r).ok() || !IsTransient(StatusOf(r)) || attempt >= options.max_attempts) return r;
    options.sleep(backoff);
    backoff = std::min(backoff * 2, options.max_backoff);
  }
}

// The agent's own bound (quantity.h), whatever the codec let through.
Status CheckAgentBounds(const api::PodAllocation& p, size_t i) {
  if (p.cpu.quota_millicores <= kMaxQuotaMillicores) return Status::Ok();
  return Status::InvalidArgument(
      "spec.pods[" + std::to_string(i) + "].cpu.quotaMillicores: must be <= " +
      std::to_string(kMaxQuotaMillicores) + " (the most a CFS quota holds), got " +
      std::to_string(p.cpu.quota_millicores));
}

// Step 1: validates everything before touching anything. Returns the allocation's uids.
StatusOr<std::set<std::string>> ValidateAllocation(const std::string& cgroup_root,
                                                   const api::NodeAllocation& desired,
                                                   const InterfaceMap& interfaces) {
  STAR_RETURN_IF_ERROR(CheckCgroupRoot(cgroup_root, "cgroup_root"));
  STAR_RETURN_IF_ERROR(api::Validate(desired.spec));
  std::set<std::string> desired_uids;
  std::map<std::string, std::string> pod_of_interface;
  for (size_t i = 0; i < desired.spec.pods.size(); ++i) {
    const auto& p = desired.spec.pods[i];
    const std::string field = "spec.pods[" + std::to_string(i) + "].uid";
    STAR_RETURN_IF_ERROR(CheckPodUid(p.uid, field));
    STAR_RETURN_IF_ERROR(CheckAgentBounds(p, i));
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
  return desired_uids;
}

// Step 3 for one pod: the guarantee it would lose, if any. `original` is the pod's
// journalled original, else its observed limits.
std::optional<std::string> GuaranteeViolation(const api::PodAllocation& p,
                                              const CpuLimits& original) {
  if (!p.guaranteed || original.quota_us <= 0 || original.period_us <= 0 ||
      p.cpu.quota_millicores <= 0 ||
      SaturatingMul(p.cpu.quota_millicores, original.period_us) >=
          SaturatingMul(original.quota_us, 1000)) {
    return std::nullopt;
  }
  return "guaranteed pod " + PodLabel(p) + " would get " +
         std::to_string(p.cpu.quota_millicores) + " millicores, below its request of " +
         std::to_string(SaturatingMul(original.quota_us, 1000) / original.period_us) +
         " millicores";
}

PodResult DesiredPodResult(const api::PodAllocation& p) {
  PodResult r;
  r.uid = p.uid;
  r.namespace_ = p.namespace_;
  r.name = p.name;
  r.cpu = p.cpu;
  r.network = p.network;
  return r;
}

// Steps 2-4 of one Reconcile, after validation, accumulating its result. Borrows
// everything it is given for its own lifetime.
class ReconcilePass {
 public:
  ReconcilePass(NodeOs& os, Journal& journal, const ReconcilerOptions& options)
      : os_(os), journal_(journal), options_(options) {}

  // Steps 2-3: plans every pod (reads only). InvalidArgument when a guarantee would be
  // broken.
  Status Plan(const api::NodeAllocation& desired, const InterfaceMap& interfaces);
  // Step 4a: journals the originals of everything about to change, in one atomic write.
  Status JournalOriginals();
  // Step 4b: restores journalled pods that left the allocation.
  void RestoreDeparted(const std::set<std::string>& desired_uids);
  // Step 4c: restores stale interfaces and writes what differs.
  void WriteChanges();
  // Step 4d: forgets what was restored, only now that it is. If the journal cannot be
  // written the entries stay, and the next pass finds the originals in place and forgets
  // them then.
  void ForgetRestored();

  ReconcileResult TakeResult() { return std::move(result_); }

 private:
  template <typename F>
  auto Retry(F&& f) -> decltype(f()) {
    return RetryWith(options_, std::forward<F>(f));
  }
  void Fail(size_t idx, Status s);
  std::optional<PodPlan> PlanPod(const api::PodAllocation& p, const InterfaceMap& interfaces,
                                 std::vector<std::string>& violations);
  // Reads the pod's interface (if it has one) into `plan`; false when the read failed.
  bool PlanNet(const api::PodAllocation& p, const InterfaceMap& interfaces,
               const JournalEntry* journalled, PodPlan& plan);
  // The pod's interface as NodeOs::PodInterface finds it, refusing one that another pod
  // of this allocation already has.
  StatusOr<std::string> DiscoverInterface(const api::PodAllocation& p, const PodPlan& plan,
                                          const InterfaceMap& interfaces);
  Status RestoreCpu(const CpuOriginal& o);
  Status RestoreNet(const NetOriginal& o);
  // Restores the stale interface of `plan` and journals its new one; false on failure.
  bool ReplaceStaleNet(const PodPlan& plan);
  void WritePlan(const PodPlan& plan);
  // What to journal as the original of the plan's interface.
  NetLimits NetOriginalOf(const PodPlan& plan) const {
    return options_.unshaped_net_originals ? NetLimits{} : *plan.observed_net;
  }

  NodeOs& os_;
  Journal& journal_;
  const ReconcilerOptions& options_;
  ReconcileResult result_;
  std::vector<PodPlan> plans_;
  std::map<std::string, std::optional<JournalEntry>> forget_;
  std::map<std::string, std::string> discovered_;  // interface -> uid, found this pass
};

void ReconcilePass::Fail(size_t idx, Status s) {
  result_.pods[idx].action = PodAction::kFailed;
  if (result_.pods[idx].status.ok()) result_.pods[idx].status = std::move(s);
}

Status ReconcilePass::Plan(const api::NodeAllocation& desired, const InterfaceMap& interfaces) {
  std::vector<std::string> violations;
  for (const auto& p : desired.spec.pods) {
    if (auto plan = PlanPod(p, interfaces, violations)) plans_.push_back(std::move(*plan));
  }
  if (violations.empty()) return Status::Ok();
  std::string msg = "allocation refused: ";
  for (size_t i = 0; i < violations.size(); ++i) msg += (i ? "; " : "") + violations[i];
  return Status::InvalidArgument(msg);
}

std::optional<PodPlan> ReconcilePass::PlanPod(const api::PodAllocation& p,
                                              const InterfaceMap& interfaces,
                                              std::vector<std::string>& violations) {
  result_.pods.push_back(DesiredPodResult(p));
  const size_t idx = result_.pods.size() - 1;
  const JournalEntry* journalled = journal_.Find(p.uid);

  auto resolved = Retry(
      [&] { return ResolvePodCgroup(os_, options_.driver, p.uid, options_.cgroup_root); });
  if (!resolved.ok()) {
    Fail(idx, resolved.status());
    return std::nullopt;
  }
  PodPlan plan;
  plan.result_index = idx;
  plan.cgroup = resolved->cgroup;
  result_.pods[idx].cgroup = plan.cgroup;
  auto cpu = Retry([&] { return os_.ReadCpu(plan.cgroup); });
  if (!cpu.ok()) {
    Fail(idx, cpu.status());
    return std::nullopt;
  }
  plan.observed_cpu = *cpu;
  const CpuLimits want = DesiredCpu(p.cpu, cpu->period_us);
  if (!(want == *cpu)) plan.write_cpu = want;

  const CpuLimits original =
      journalled && journalled->cpu ? journalled->cpu->limits : *cpu;
  if (auto v = GuaranteeViolation(p, original)) violations.push_back(std::move(*v));

  if (!PlanNet(p, interfaces, journalled, plan)) return std::nullopt;
  if (journalled && journalled->net && journalled->net->interface != plan.interface) {
    plan.stale_net = journalled->net;
  }
  return plan;
}

StatusOr<std::string> ReconcilePass::DiscoverInterface(const api::PodAllocation& p,
                                                       const PodPlan& plan,
                                                       const InterfaceMap& interfaces) {
  STAR_ASSIGN_OR_RETURN(std::string ifname, Retry([&] { return os_.PodInterface(plan.cgroup); }));
  STAR_RETURN_IF_ERROR(CheckInterfaceName(ifname, "interface of pod " + p.uid));
  std::string other;
  for (const auto& [uid, name] : interfaces) {
    if (name == ifname && uid != p.uid) other = uid;
  }
  if (auto d = discovered_.find(ifname); d != discovered_.end()) other = d->second;
  if (!other.empty()) {
    return Status::FailedPrecondition("interface " + ifname + " is already pod " + other + "'s");
  }
  discovered_[ifname] = p.uid;
  return ifname;
}

bool ReconcilePass::PlanNet(const api::PodAllocation& p, const InterfaceMap& interfaces,
                            const JournalEntry* journalled, PodPlan& plan) {
  PodResult& r = result_.pods[plan.result_index];
  if (auto it = interfaces.find(p.uid); it != interfaces.end()) {
    plan.interface = it->second;  // the explicit mapping wins over discovery
  } else {
    const bool shape = !(DesiredNet(p.network) == NetLimits{});
    if (!shape && !options_.unshaped_net_originals) return true;
    auto found = DiscoverInterface(p, plan, interfaces);
    if (!found.ok()) {
      if (shape) r.network_skipped = found.status().WithPrefix("interface not found");
      // Whatever the pod's journalled interface carries stays as it is until it is found.
      if (journalled && journalled->net) plan.interface = journalled->net->interface;
      r.interface = plan.interface;
      return true;
    }
    plan.interface = *found;
    r.interface_discovered = true;
  }
  r.interface = plan.interface;
  auto net = Retry([&] { return os_.ReadNet(plan.interface); });
  if (!net.ok()) {
    Fail(plan.result_index, net.status().WithPrefix("interface " + plan.interface));
    return false;
  }
  plan.observed_net = *net;
  const NetLimits want_net = DesiredNet(p.network);
  if (!(want_net == *net)) plan.write_net = want_net;
  return true;
}

Status ReconcilePass::JournalOriginals() {
  std::map<std::string, std::optional<JournalEntry>> record;
  for (const auto& plan : plans_) {
    const std::string& uid = result_.pods[plan.result_index].uid;
    const JournalEntry* old = journal_.Find(uid);
    JournalEntry e = old ? *old : JournalEntry{};
    if (plan.write_cpu && !e.cpu) e.cpu = CpuOriginal{plan.cgroup, *plan.observed_cpu};
    // After a lost journal, shaping already in force may be the agent's own: journalled
    // (as unshaped) even when nothing is written, so that a restore removes it.
    const bool shaped_before = options_.unshaped_net_originals && plan.observed_net &&
                               !(*plan.observed_net == NetLimits{});
    if ((plan.write_net || shaped_before) && (!e.net || e.net->interface != plan.interface) &&
        !plan.stale_net) {
      e.net = NetOriginal{plan.interface, NetOriginalOf(plan)};
    }
    if (old ? !(e == *old) : (e.cpu || e.net)) record[uid] = e;
  }
  return journal_.Commit(record);
}

Status ReconcilePass::RestoreNet(const NetOriginal& o) {
  auto exists = Retry([&] { return os_.InterfaceExists(o.interface); });
  if (!exists.ok()) return exists.status();
  if (!*exists) return Status::Ok();  // gone with its pod: nothing to restore
  auto net = Retry([&] { return os_.ReadNet(o.interface); });
  if (!net.ok()) return net.status();
  if (*net == o.limits) return Status::Ok();
  STAR_RETURN_IF_ERROR(Retry([&] { return os_.WriteNet(o.interface, o.limits); }));
  ++result_.writes;
  return Status::Ok();
}

Status ReconcilePass::RestoreCpu(const CpuOriginal& o) {
  auto exists = Retry([&] { return os_.CgroupExists(o.cgroup); });
  if (!exists.ok()) return exists.status();
  if (!*exists) return Status::Ok();
  auto cpu = Retry([&] { return os_.ReadCpu(o.cgroup); });
  if (!cpu.ok()) return cpu.status();
  if (*cpu == o.limits) return Status::Ok();
  STAR_RETURN_IF_ERROR(Retry([&] { return os_.WriteCpu(o.cgroup, o.limits); }));
  ++result_.writes;
  return Status::Ok();
}

void ReconcilePass::RestoreDeparted(const std::set<std::string>& desired_uids) {
  for (const auto& [uid, entry] : journal_.entries()) {
    if (desired_uids.count(uid)) continue;
    PodResult r;
    r.uid = uid;
    r.in_allocation = false;
    r.action = PodAction::kRestored;
    if (entry.cpu) r.cgroup = entry.cpu->cgroup;
    if (entry.net) r.interface = entry.net->interface;
    Status s = entry.cpu ? RestoreCpu(*entry.cpu) : Status::Ok();
    if (s.ok() && entry.net) s = RestoreNet(*entry.net);
    if (s.ok()) {
      forget_[uid] = std::nullopt;
    } else {
      r.action = PodAction::kFailed;
      r.status = s;
    }
    result_.pods.push_back(std::move(r));
  }
}

bool ReconcilePass::ReplaceStaleNet(const PodPlan& plan) {
  const std::string& uid = result_.pods[plan.result_index].uid;
  Status s = RestoreNet(*plan.stale_net);
  if (!s.ok()) {
    Fail(plan.result_index, s.WithPrefix("restoring interface " + plan.stale_net->interface));
    return false;
  }
  JournalEntry e = *journal_.Find(uid);
  e.net = plan.write_net
              ? std::optional<NetOriginal>(NetOriginal{plan.interface, NetOriginalOf(plan)})
              : std::nullopt;
  if (!e.cpu && !e.net) {
    forget_[uid] = std::nullopt;
    return true;
  }
  // The new interface's original must be durable before it is changed.
  Status js = journal_.Commit({{uid, e}});
  if (!js.ok()) {
    Fail(plan.result_index, js);
    return false;
  }
  return true;
}

void ReconcilePass::WritePlan(const PodPlan& plan) {
  PodResult& r = result_.pods[plan.result_index];
  if (plan.stale_net && !ReplaceStaleNet(plan)) return;
  if (plan.write_cpu) {
    Status s = Retry([&] { return os_.WriteCpu(plan.cgroup, *plan.write_cpu); });
    if (!s.ok()) {
      Fail(plan.result_index, s.WithPrefix("cgroup " + plan.cgroup));
      return;
    }
    ++result_.writes;
    r.action = PodAction::kApplied;
  }
  if (plan.write_net) {
    Status s = Retry([&] { return os_.WriteNet(plan.interface, *plan.write_net); });
    if (!s.ok()) {
      Fail(plan.result_index, s.WithPrefix("interface " + plan.interface));
      return;
    }
    ++result_.writes;
    r.action = PodAction::kApplied;
  }
}

void ReconcilePass::WriteChanges() {
  for (const auto& plan : plans_) WritePlan(plan);
}

void ReconcilePass::ForgetRestored() {
  if (Status js = journal_.Commit(forget_); !js.ok()) {
    for (PodResult& r : result_.pods) {
      if (!r.in_allocation && r.action == PodAction::kRestored) {
        r.action = PodAction::kFailed;
        r.status = js;
      }
    }
  }
}

}  // namespace

Reconciler::Reconciler(NodeOs& os, Journal& journal, ReconcilerOptions options)
    : os_(os), journal_(journal), options_(std::move(options)) {
  options_.max_attempts = std::max(1, options_.max_attempts);
  if (!options_.sleep) {
    options_.sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  }
}

StatusOr<ReconcileResult> Reconciler::ReleaseAll() {
  api::NodeAllocation none;
  none.name = "release";
  return Reconcile(none);
}

StatusOr<ReconcileResult> Reconciler::Reconcile(const api::NodeAllocation& desired,
                                                const InterfaceMap& interfaces) {
  STAR_ASSIGN_OR_RETURN(const std::set<std::string> desired_uids,
                        ValidateAllocation(options_.cgroup_root, desired, interfaces));
  ReconcilePass pass(os_, journal_, options_);
  STAR_RETURN_IF_ERROR(pass.Plan(desired, interfaces));
  STAR_RETURN_IF_ERROR(pass.JournalOriginals());
  pass.RestoreDeparted(desired_uids);
  pass.WriteChanges();
  pass.ForgetRestored();
  return pass.TakeResult();
}

}  // namespace star::agent
