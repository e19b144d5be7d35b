#include "star/agent/journal_rebuild.h"

#include <algorithm>
#include <optional>
#include <string>

#include "star/agent/quantity.h"

namespace star::agent {
namespace {

// How one QoS level names its pod cgroups: <parent>/<prefix><id><suffix>.
struct PodNaming {
  std::string parent, prefix, suffix;
};

// Derived from PodCgroup itself, so both agree on every driver and class.
StatusOr<PodNaming> NamingOf(CgroupDriver driver, QosClass qos, std::string_view root) {
  STAR_ASSIGN_OR_RETURN(std::string probe, PodCgroup(driver, qos, "0"));
  const size_t slash = probe.rfind('/');
  const std::string leaf = probe.substr(slash + 1);
  const size_t id = leaf.rfind('0');
  PodNaming n{probe.substr(0, slash), leaf.substr(0, id), leaf.substr(id + 1)};
  if (!root.empty()) n.parent = std::string(root) + "/" + n.parent;
  return n;
}

// The pod uid in a cgroup's name, or nullopt when it is no pod cgroup of `n`.
std::optional<std::string> UidOf(const PodNaming& n, const std::string& name) {
  if (name.size() <= n.prefix.size() + n.suffix.size() || name.rfind(n.prefix, 0) != 0 ||
      name.compare(name.size() - n.suffix.size(), n.suffix.size(), n.suffix) != 0) {
    return std::nullopt;
  }
  std::string uid = name.substr(n.prefix.size(), name.size() - n.prefix.size() - n.suffix.size());
  std::replace(uid.begin(), uid.end(), '_', '-');  // systemd's escaping of '-'
  if (!CheckPodUid(uid).ok()) return std::nullopt;
  return uid;
}

// The pod's own limits, from its children (see the header); nullopt without children.
StatusOr<std::optional<CpuLimits>> PodLimitsFromChildren(NodeOs& os, const std::string& pod,
                                                         const CpuLimits& current) {
  STAR_ASSIGN_OR_RETURN(std::vector<std::string> children, os.ListCgroups(pod));
  if (children.empty()) return std::optional<CpuLimits>();
  CpuLimits l{0, current.period_us, 0};
  for (const std::string& child : children) {
    STAR_ASSIGN_OR_RETURN(CpuLimits c, os.ReadCpu(pod + "/" + child));
    if (c.quota_us < 0 || c.period_us <= 0 || l.quota_us < 0) {
      l.quota_us = -1;
    } else {
      l.quota_us = SaturatingAdd(l.quota_us, SaturatingMul(c.quota_us, l.period_us) / c.period_us);
    }
    l.weight = SaturatingAdd(l.weight, c.weight);
  }
  if (l.quota_us >= 0) l.quota_us = std::clamp<int64_t>(l.quota_us, 1000, kMaxQuotaUs);
  l.weight = std::clamp<int64_t>(l.weight, 1, 10000);
  return std::optional<CpuLimits>(l);
}

}  // namespace

StatusOr<JournalEntries> RebuildOriginals(NodeOs& os, CgroupDriver driver,
                                          std::string_view root) {
  STAR_RETURN_IF_ERROR(CheckCgroupRoot(root, "cgroup root"));
  JournalEntries out;
  for (QosClass q : {QosClass::kGuaranteed, QosClass::kBurstable, QosClass::kBestEffort}) {
    STAR_ASSIGN_OR_RETURN(PodNaming naming, NamingOf(driver, q, root));
    auto names = os.ListCgroups(naming.parent);
    if (!names.ok() && names.status().code() == StatusCode::kNotFound) continue;
    if (!names.ok()) return names.status();
    for (const std::string& name : *names) {
      std::optional<std::string> uid = UidOf(naming, name);
      if (!uid) continue;
      const std::string cgroup = naming.parent + "/" + name;
      auto current = os.ReadCpu(cgroup);
      auto own = current.ok() ? PodLimitsFromChildren(os, cgroup, *current)
                              : StatusOr<std::optional<CpuLimits>>(current.status());
      if (!own.ok() && own.status().code() == StatusCode::kNotFound) continue;  // pod gone
      if (!own.ok()) return own.status();
      if (*own && !(**own == *current)) out[*uid].cpu = CpuOriginal{cgroup, **own};
    }
  }
  return out;
}

}  // namespace star::agent
