#include "star/agent/real_node_os.h"

#include <libcgroup.h>
#include <linux/if.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/tc_act/tc_mirred.h>
#include <netlink/netlink.h>
#include <netlink/route/act/mirred.h>
#include <netlink/route/action.h>
#include <netlink/route/class.h>
#include <netlink/route/classifier.h>
#include <netlink/route/cls/u32.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/tc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>

#include "os/limits_check.h"
#include "os/pod_netns.h"
#include "star/agent/quantity.h"
#include "star/core/common/hash.h"

namespace star::agent {
namespace {

// ---- libcgroup adapter: the only place its int codes become Status. ----
Status CgError(int rc, const std::string& what) {
  std::string msg = what + ": " + cgroup_strerror(rc);
  if (rc == ECGOTHER) msg += std::string(" (") + std::strerror(cgroup_get_last_errno()) + ")";
  if (rc == ECGROUPNOTEXIST) return Status::NotFound(msg);
  return Status::Internal(msg);
}

struct CgroupFree {
  void operator()(cgroup* c) const { cgroup_free(&c); }
};
using CgroupPtr = std::unique_ptr<cgroup, CgroupFree>;

Status CgInitOnce() {
  static std::once_flag once;
  static int rc = 0;
  std::call_once(once, [] { rc = cgroup_init(); });
  return rc == 0 ? Status::Ok() : CgError(rc, "cgroup_init").WithPrefix("libcgroup");
}

StatusOr<std::string> CgMountPoint(const char* controller) {
  char* mnt = nullptr;
  int rc = cgroup_get_subsys_mount_point(controller, &mnt);
  if (rc != 0) return CgError(rc, std::string("mount point of ") + controller);
  std::string out(mnt);
  std::free(mnt);
  return out;
}

bool IsDir(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// ---- libnl adapter: the only place its negative codes become Status. ----
Status NlError(int err, const std::string& what) {
  std::string msg = what + ": " + nl_geterror(err);
  int e = err < 0 ? -err : err;
  if (e == NLE_OBJ_NOTFOUND || e == NLE_NODEV) return Status::NotFound(msg);
  if (e == NLE_PERM) return Status::FailedPrecondition(msg);
  return Status::Internal(msg);
}

template <typename T, void (*Put)(T*)>
struct NlDel {
  void operator()(T* p) const { if (p) Put(p); }
};
using LinkPtr = std::unique_ptr<rtnl_link, NlDel<rtnl_link, rtnl_link_put>>;
using QdiscPtr = std::unique_ptr<rtnl_qdisc, NlDel<rtnl_qdisc, rtnl_qdisc_put>>;
using ClassPtr = std::unique_ptr<rtnl_class, NlDel<rtnl_class, rtnl_class_put>>;
using ClsPtr = std::unique_ptr<rtnl_cls, NlDel<rtnl_cls, rtnl_cls_put>>;
using ActPtr = std::unique_ptr<rtnl_act, NlDel<rtnl_act, rtnl_act_put>>;
using CachePtr = std::unique_ptr<nl_cache, NlDel<nl_cache, nl_cache_free>>;
using SockPtr = std::unique_ptr<nl_sock, NlDel<nl_sock, nl_socket_free>>;

constexpr uint32_t kRootHandle = TC_HANDLE(1, 0);
constexpr uint32_t kClassHandle = TC_HANDLE(1, 1);
constexpr uint32_t kIngressHandle = TC_H_MAKE(TC_H_INGRESS, 0);  // ffff:
constexpr uint32_t kRedirectPrio = 1;  // our u32 redirect filter's priority on ffff:

// Ingress limits (libnl-route 3.7 has no police action): traffic arriving on the
// interface is redirected to an IFB device and shaped there on egress. Installed: an IFB
// device (IfbName), up, with root htb 1: / default class 1:1 rate = ceil = the limit and the
// given priority; on the interface an ingress qdisc ffff: with a u32 match-all filter
// (priority 1) whose action is mirred egress redirect to the IFB. A limit of 0 deletes the
// ingress qdisc (filter included) and the IFB device. ReadNet reports ingress from the IFB's
// class 1:1, and 0 when the ingress qdisc or the IFB is missing. Needs the ifb, act_mirred
// and cls_u32 kernel modules (autoloaded).

class RealNodeOs final : public NodeOs {
 public:
  RealNodeOs(CgroupVersion v, std::string root, std::string prefix, SockPtr sock,
             internal::NetnsId netns)
      : version_(v),
        root_(std::move(root)),
        prefix_(std::move(prefix)),
        netns_(netns),
        sock_(std::move(sock)) {}

  CgroupVersion cgroup_version() const override { return version_; }

  StatusOr<bool> CgroupExists(const std::string& cgroup) override {
    STAR_RETURN_IF_ERROR(CheckPath(cgroup));
    return IsDir(root_ + "/" + cgroup);
  }

  StatusOr<CpuLimits> ReadCpu(const std::string& cgroup) override {
    STAR_RETURN_IF_ERROR(CheckExisting(cgroup));
    std::lock_guard lock(mu_);
    return version_ == CgroupVersion::kV1 ? ReadCpuV1(cgroup) : ReadCpuV2(cgroup);
  }

  Status WriteCpu(const std::string& cgroup, const CpuLimits& limits) override {
    STAR_RETURN_IF_ERROR(internal::CheckCpuLimits(limits));
    STAR_RETURN_IF_ERROR(CheckExisting(cgroup));
    std::lock_guard lock(mu_);
    return version_ == CgroupVersion::kV1 ? WriteCpuV1(cgroup, limits)
                                          : WriteCpuV2(cgroup, limits);
  }

  StatusOr<CpuStats> ReadCpuStats(const std::string& cgroup) override {
    STAR_RETURN_IF_ERROR(CheckExisting(cgroup));
    std::lock_guard lock(mu_);
    return version_ == CgroupVersion::kV1 ? ReadStatsV1(cgroup) : ReadStatsV2(cgroup);
  }

  StatusOr<std::vector<std::string>> ListCgroups(const std::string& cgroup) override {
    STAR_RETURN_IF_ERROR(CheckExisting(cgroup));
    std::error_code ec;
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(root_ + "/" + cgroup, ec)) {
      if (e.is_directory(ec)) names.push_back(e.path().filename().string());
    }
    if (ec) return Status::Internal("list " + cgroup + ": " + ec.message());
    std::sort(names.begin(), names.end());
    return names;
  }

  StatusOr<bool> InterfaceExists(const std::string& ifname) override {
    STAR_RETURN_IF_ERROR(internal::CheckIfname(ifname));
    std::lock_guard lock(mu_);
    auto link = GetLink(ifname);
    if (link.ok()) return true;
    if (link.status().code() == StatusCode::kNotFound) return false;
    return link.status();
  }

  StatusOr<NetLimits> ReadNet(const std::string& ifname) override;
  Status WriteNet(const std::string& ifname, const NetLimits& limits) override;

  StatusOr<NetStats> ReadNetStats(const std::string& ifname) override {
    STAR_RETURN_IF_ERROR(internal::CheckIfname(ifname));
    std::lock_guard lock(mu_);
    STAR_ASSIGN_OR_RETURN(LinkPtr link, GetLink(ifname));
    NetStats s;
    s.tx_bytes = static_cast<int64_t>(rtnl_link_get_stat(link.get(), RTNL_LINK_TX_BYTES));
    s.rx_bytes = static_cast<int64_t>(rtnl_link_get_stat(link.get(), RTNL_LINK_RX_BYTES));
    return s;
  }

  StatusOr<std::string> PodInterface(const std::string& cgroup) override;

 private:
  Status CheckPath(const std::string& cgroup) const {
    STAR_RETURN_IF_ERROR(internal::CheckCgroupPath(cgroup));
    if (cgroup != prefix_ && cgroup.rfind(prefix_ + "/", 0) != 0) {
      return Status::InvalidArgument("cgroup path \"" + cgroup + "\" is outside \"" + prefix_ +
                                     "\"");
    }
    return Status::Ok();
  }
  Status CheckExisting(const std::string& cgroup) const {
    STAR_RETURN_IF_ERROR(CheckPath(cgroup));
    if (!IsDir(root_ + "/" + cgroup)) return Status::NotFound("cgroup " + cgroup);
    return Status::Ok();
  }

  // v1, through libcgroup.
  StatusOr<CpuLimits> ReadCpuV1(const std::string& cgroup) {
    CgroupPtr cg(cgroup_new_cgroup(cgroup.c_str()));
    if (!cg) return Status::Internal("cgroup_new_cgroup failed");
    if (int rc = cgroup_get_cgroup(cg.get()); rc != 0) return CgError(rc, "read " + cgroup);
    cgroup_controller* ctrl = cgroup_get_controller(cg.get(), "cpu");
    if (ctrl == nullptr) return Status::NotFound("cgroup " + cgroup + " has no cpu controller");
    CpuLimits l;
    int64_t shares = 0;
    for (auto [name, out] : {std::pair{"cpu.cfs_quota_us", &l.quota_us},
                             std::pair{"cpu.cfs_period_us", &l.period_us},
                             std::pair{"cpu.shares", &shares}}) {
      if (int rc = cgroup_get_value_int64(ctrl, name, out); rc != 0) {
        return CgError(rc, "read " + cgroup + "/" + name);
      }
    }
    l.weight = std::llround(
        std::clamp(static_cast<double>(shares) * 100.0 / 1024.0, 1.0, 10000.0));
    return l;
  }

  Status WriteCpuV1(const std::string& cgroup, const CpuLimits& l) {
    CgroupPtr cg(cgroup_new_cgroup(cgroup.c_str()));
    if (!cg) return Status::Internal("cgroup_new_cgroup failed");
    cgroup_controller* ctrl = cgroup_add_controller(cg.get(), "cpu");
    if (ctrl == nullptr) return Status::Internal("cgroup_add_controller(cpu) failed");
    const int64_t shares = std::max<int64_t>(2, l.weight * 1024 / 100);
    for (auto [name, v] : {std::pair{"cpu.cfs_period_us", l.period_us},
                           std::pair{"cpu.cfs_quota_us", l.quota_us},
                           std::pair{"cpu.shares", shares}}) {
      if (int rc = cgroup_add_value_int64(ctrl, name, v); rc != 0) {
        return CgError(rc, std::string("set ") + name);
      }
    }
    if (int rc = cgroup_modify_cgroup(cg.get()); rc != 0) return CgError(rc, "write " + cgroup);
    return Status::Ok();
  }

  StatusOr<CpuStats> ReadStatsV1(const std::string& cgroup) {
    CpuStats s;
    void* handle = nullptr;
    cgroup_stat st{};
    int rc = cgroup_read_stats_begin("cpu", cgroup.c_str(), &handle, &st);
    while (rc == 0) {
      int64_t v = std::strtoll(st.value, nullptr, 10);
      if (std::strcmp(st.name, "nr_periods") == 0) s.nr_periods = v;
      if (std::strcmp(st.name, "nr_throttled") == 0) s.nr_throttled = v;
      if (std::strcmp(st.name, "throttled_time") == 0) s.throttled_usec = v / 1000;
      rc = cgroup_read_stats_next(&handle, &st);
    }
    if (handle != nullptr) cgroup_read_stats_end(&handle);
    if (rc != ECGEOF) return CgError(rc, "read " + cgroup + "/cpu.stat");
    // Usage lives in the cpuacct controller (often a separate v1 hierarchy); 0 if absent.
    auto acct = CgMountPoint("cpuacct");
    if (acct.ok() && IsDir(*acct + "/" + cgroup)) {
      CgroupPtr cg(cgroup_new_cgroup(cgroup.c_str()));
      if (!cg) return Status::Internal("cgroup_new_cgroup failed");
      if (int r = cgroup_get_cgroup(cg.get()); r != 0) return CgError(r, "read " + cgroup);
      cgroup_controller* ctrl = cgroup_get_controller(cg.get(), "cpuacct");
      int64_t ns = 0;
      if (ctrl != nullptr && cgroup_get_value_int64(ctrl, "cpuacct.usage", &ns) == 0) {
        s.usage_usec = ns / 1000;
      }
    }
    return s;
  }

  // v2, direct file I/O (libcgroup 2.0's v2 value handling does not cover cpu.max).
  StatusOr<std::string> ReadFile(const std::string& cgroup, const char* file) {
    std::ifstream in(root_ + "/" + cgroup + "/" + file);
    if (!in) return Status::Internal("cannot read " + cgroup + "/" + file + ": " + std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  Status WriteFile(const std::string& cgroup, const char* file, const std::string& value) {
    std::ofstream out(root_ + "/" + cgroup + "/" + file);
    out << value;
    out.flush();
    if (!out) return Status::Internal("cannot write " + cgroup + "/" + file + ": " + std::strerror(errno));
    return Status::Ok();
  }

  StatusOr<CpuLimits> ReadCpuV2(const std::string& cgroup) {
    STAR_ASSIGN_OR_RETURN(std::string max, ReadFile(cgroup, "cpu.max"));
    STAR_ASSIGN_OR_RETURN(std::string weight, ReadFile(cgroup, "cpu.weight"));
    CpuLimits l;
    std::istringstream ms(max);
    std::string quota;
    ms >> quota >> l.period_us;
    l.quota_us = quota == "max" ? -1 : std::strtoll(quota.c_str(), nullptr, 10);
    l.weight = std::strtoll(weight.c_str(), nullptr, 10);
    return l;
  }

  Status WriteCpuV2(const std::string& cgroup, const CpuLimits& l) {
    std::string quota = l.quota_us < 0 ? "max" : std::to_string(l.quota_us);
    STAR_RETURN_IF_ERROR(WriteFile(cgroup, "cpu.max", quota + " " + std::to_string(l.period_us)));
    return WriteFile(cgroup, "cpu.weight", std::to_string(l.weight));
  }

  StatusOr<CpuStats> ReadStatsV2(const std::string& cgroup) {
    STAR_ASSIGN_OR_RETURN(std::string text, ReadFile(cgroup, "cpu.stat"));
    CpuStats s;
    std::istringstream in(text);
    std::string name;
    int64_t v = 0;
    while (in >> name >> v) {
      if (name == "usage_usec") s.usage_usec = v;
      if (name == "nr_periods") s.nr_periods = v;
      if (name == "nr_throttled") s.nr_throttled = v;
      if (name == "throttled_usec") s.throttled_usec = v;
    }
    return s;
  }

  StatusOr<LinkPtr> GetLink(const std::string& ifname) {
    rtnl_link* link = nullptr;
    int err = rtnl_link_get_kernel(sock_.get(), 0, ifname.c_str(), &link);
    if (err < 0) return NlError(err, "interface " + ifname);
    return LinkPtr(link);
  }

  // Our root qdisc (htb 1:) on ifindex, or null if the root is absent or someone else's.
  StatusOr<QdiscPtr> OurRootQdisc(int ifindex) {
    nl_cache* raw = nullptr;
    if (int err = rtnl_qdisc_alloc_cache(sock_.get(), &raw); err < 0) {
      return NlError(err, "list qdiscs");
    }
    CachePtr cache(raw);
    QdiscPtr q(rtnl_qdisc_get_by_parent(cache.get(), ifindex, TC_H_ROOT));
    if (q && rtnl_tc_get_handle(TC_CAST(q.get())) == kRootHandle &&
        std::strcmp(rtnl_tc_get_kind(TC_CAST(q.get())), "htb") == 0) {
      return q;
    }
    return QdiscPtr();
  }

  Status DeleteRoot(int ifindex, const std::string& ifname) {
    STAR_ASSIGN_OR_RETURN(QdiscPtr q, OurRootQdisc(ifindex));
    if (!q) return Status::Ok();
    int err = rtnl_qdisc_delete(sock_.get(), q.get());
    if (err < 0 && -err != NLE_OBJ_NOTFOUND) return NlError(err, "delete qdisc on " + ifname);
    return Status::Ok();
  }

  struct HtbRate {
    int64_t bits_per_second;
    int priority;
  };
  StatusOr<std::optional<HtbRate>> ReadHtb(int ifindex, const std::string& ifname);
  Status ApplyHtb(int ifindex, const std::string& ifname, int64_t bits_per_second, int priority);
  StatusOr<NetLimits> ReadNetLocked(int ifindex, const std::string& ifname);
  Status ApplyNetLocked(int ifindex, const std::string& ifname, const NetLimits& limits);
  StatusOr<QdiscPtr> OurIngressQdisc(int ifindex);
  StatusOr<int> EnsureIfb(const std::string& name, bool* created);
  Status DeleteIfb(const std::string& name);
  Status EnsureRedirect(int ifindex, const std::string& ifname, int ifb_index, bool renew);
  Status ApplyIngress(int ifindex, const std::string& ifname, int64_t bits_per_second,
                      int priority);
  Status RemoveIngress(int ifindex, const std::string& ifname);

  const CgroupVersion version_;
  const std::string root_;
  const std::string prefix_;
  const internal::NetnsId netns_;  // where sock_ was opened: the node's (host) namespace
  std::mutex mu_;  // guards sock_ and serialises libcgroup use
  SockPtr sock_;
};

// Rate and priority of class 1:1 under our root qdisc (htb 1:) on ifindex; nullopt when
// that qdisc or class is absent.
StatusOr<std::optional<RealNodeOs::HtbRate>> RealNodeOs::ReadHtb(int ifindex,
                                                                 const std::string& ifname) {
  STAR_ASSIGN_OR_RETURN(QdiscPtr q, OurRootQdisc(ifindex));
  if (!q) return std::optional<HtbRate>();
  nl_cache* raw = nullptr;
  if (int err = rtnl_class_alloc_cache(sock_.get(), ifindex, &raw); err < 0) {
    return NlError(err, "list classes on " + ifname);
  }
  CachePtr cache(raw);
  ClassPtr cls(rtnl_class_get(cache.get(), ifindex, kClassHandle));
  if (!cls) return std::optional<HtbRate>();  // qdisc without our class: unlimited
  uint64_t bytes_per_s = 0;
  if (int err = rtnl_htb_get_rate64(cls.get(), &bytes_per_s); err < 0) {
    return NlError(err, "read htb rate on " + ifname);
  }
  // Saturating: the kernel keeps 64-bit bytes per second, more than an int64 of bits holds.
  const int64_t bytes = static_cast<int64_t>(
      std::min<uint64_t>(bytes_per_s, std::numeric_limits<int64_t>::max()));
  return std::optional<HtbRate>(HtbRate{SaturatingMul(bytes, 8),
                                        static_cast<int>(rtnl_htb_get_prio(cls.get()))});
}

// Installs root htb 1: with default class 1:1 (rate = ceil) on ifindex; an existing 1: is
// kept and only its class replaced. A root qdisc created here is removed again on failure.
Status RealNodeOs::ApplyHtb(int ifindex, const std::string& ifname, int64_t bits_per_second,
                            int priority) {
  STAR_ASSIGN_OR_RETURN(QdiscPtr existing, OurRootQdisc(ifindex));
  const bool fresh = !existing;
  if (fresh) {  // htb has no qdisc 'change': an existing 1: is kept, only its class is replaced
    QdiscPtr q(rtnl_qdisc_alloc());
    if (!q) return Status::Internal("rtnl_qdisc_alloc failed");
    rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_ROOT);
    rtnl_tc_set_handle(TC_CAST(q.get()), kRootHandle);
    if (int err = rtnl_tc_set_kind(TC_CAST(q.get()), "htb"); err < 0) {
      return NlError(err, "htb qdisc");
    }
    rtnl_htb_set_defcls(q.get(), kClassHandle);
    if (int err = rtnl_qdisc_add(sock_.get(), q.get(), NLM_F_CREATE | NLM_F_REPLACE); err < 0) {
      return NlError(err, "add htb qdisc on " + ifname);
    }
  }

  ClassPtr cls(rtnl_class_alloc());
  if (!cls) return Status::Internal("rtnl_class_alloc failed");
  rtnl_tc_set_ifindex(TC_CAST(cls.get()), ifindex);
  rtnl_tc_set_parent(TC_CAST(cls.get()), kRootHandle);
  rtnl_tc_set_handle(TC_CAST(cls.get()), kClassHandle);
  Status st;
  if (int err = rtnl_tc_set_kind(TC_CAST(cls.get()), "htb"); err < 0) st = NlError(err, "htb class");
  const auto bytes = static_cast<uint64_t>(bits_per_second / 8);
  if (st.ok()) {
    rtnl_htb_set_rate64(cls.get(), bytes);
    rtnl_htb_set_ceil64(cls.get(), bytes);
    rtnl_htb_set_prio(cls.get(), static_cast<uint32_t>(priority));
    if (int err = rtnl_class_add(sock_.get(), cls.get(), NLM_F_CREATE | NLM_F_REPLACE); err < 0) {
      st = NlError(err, "add htb class on " + ifname);
    }
  }
  if (!st.ok() && fresh) (void)DeleteRoot(ifindex, ifname);  // nothing half-applied
  return st;
}

// Our ingress qdisc (kind "ingress", ffff:) on ifindex, or null. Any ingress qdisc is
// considered ours (there is only one per interface).
StatusOr<QdiscPtr> RealNodeOs::OurIngressQdisc(int ifindex) {
  nl_cache* raw = nullptr;
  if (int err = rtnl_qdisc_alloc_cache(sock_.get(), &raw); err < 0) {
    return NlError(err, "list qdiscs");
  }
  CachePtr cache(raw);
  QdiscPtr q(rtnl_qdisc_get_by_parent(cache.get(), ifindex, TC_H_INGRESS));
  const char* kind = q ? rtnl_tc_get_kind(TC_CAST(q.get())) : nullptr;
  if (kind != nullptr && std::strcmp(kind, "ingress") == 0) return q;
  return QdiscPtr();
}

// Returns the ifindex of IFB device `name`, creating it (and setting it up) when missing;
// *created tells whether it was made here. FailedPrecondition when `name` exists but is
// not an IFB device.
StatusOr<int> RealNodeOs::EnsureIfb(const std::string& name, bool* created) {
  *created = false;
  StatusOr<LinkPtr> got = GetLink(name);
  if (!got.ok() && got.status().code() != StatusCode::kNotFound) return got.status();
  if (!got.ok()) {
    LinkPtr l(rtnl_link_alloc());
    if (!l) return Status::Internal("rtnl_link_alloc failed");
    rtnl_link_set_name(l.get(), name.c_str());
    if (int err = rtnl_link_set_type(l.get(), "ifb"); err < 0) return NlError(err, "ifb link");
    rtnl_link_set_flags(l.get(), IFF_UP);
    if (int err = rtnl_link_add(sock_.get(), l.get(), NLM_F_CREATE | NLM_F_EXCL); err < 0) {
      return NlError(err, "create ifb device " + name);
    }
    *created = true;
    got = GetLink(name);
    if (!got.ok()) {
      (void)DeleteIfb(name);
      *created = false;
      return got.status();
    }
  } else {
    const char* type = rtnl_link_get_type(got->get());
    if (type == nullptr || std::strcmp(type, "ifb") != 0) {
      return Status::FailedPrecondition("interface " + name + " exists and is not an ifb device");
    }
  }
  if ((rtnl_link_get_flags(got->get()) & IFF_UP) == 0) {
    LinkPtr change(rtnl_link_alloc());
    if (!change) return Status::Internal("rtnl_link_alloc failed");
    rtnl_link_set_flags(change.get(), IFF_UP);
    if (int err = rtnl_link_change(sock_.get(), got->get(), change.get(), 0); err < 0) {
      if (*created) (void)DeleteIfb(name);
      *created = false;
      return NlError(err, "set " + name + " up");
    }
  }
  return rtnl_link_get_ifindex(got->get());
}

// Deletes IFB device `name`; OK when it is absent. A non-IFB device of that name is left
// alone.
Status RealNodeOs::DeleteIfb(const std::string& name) {
  StatusOr<LinkPtr> got = GetLink(name);
  if (!got.ok()) return got.status().code() == StatusCode::kNotFound ? Status::Ok() : got.status();
  const char* type = rtnl_link_get_type(got->get());
  if (type == nullptr || std::strcmp(type, "ifb") != 0) return Status::Ok();
  int err = rtnl_link_delete(sock_.get(), got->get());
  if (err < 0 && -err != NLE_OBJ_NOTFOUND && -err != NLE_NODEV) {
    return NlError(err, "delete ifb device " + name);
  }
  return Status::Ok();
}

// Ensures ingress qdisc ffff: on ifindex with our u32 match-all filter (key 0/0 at offset
// 0, priority kRedirectPrio; cls_matchall/cls_basic are not available on every kernel)
// redirecting everything (mirred egress redirect) to ifb_index. An existing u32 filter at
// that priority is kept unless `renew`
// (the IFB was just created, so an old filter points at a stale device). An ingress qdisc
// created here is removed again on failure.
Status RealNodeOs::EnsureRedirect(int ifindex, const std::string& ifname, int ifb_index,
                                  bool renew) {
  STAR_ASSIGN_OR_RETURN(QdiscPtr existing, OurIngressQdisc(ifindex));
  const bool fresh = !existing;
  if (fresh) {
    QdiscPtr q(rtnl_qdisc_alloc());
    if (!q) return Status::Internal("rtnl_qdisc_alloc failed");
    rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_INGRESS);
    rtnl_tc_set_handle(TC_CAST(q.get()), kIngressHandle);
    if (int err = rtnl_tc_set_kind(TC_CAST(q.get()), "ingress"); err < 0) {
      return NlError(err, "ingress qdisc");
    }
    if (int err = rtnl_qdisc_add(sock_.get(), q.get(), NLM_F_CREATE | NLM_F_EXCL); err < 0) {
      return NlError(err, "add ingress qdisc on " + ifname);
    }
  }
  auto undo = [&](Status st) {
    if (fresh) {
      QdiscPtr q;
      if (auto got = OurIngressQdisc(ifindex); got.ok()) q = std::move(*got);
      if (q) (void)rtnl_qdisc_delete(sock_.get(), q.get());
    }
    return st;
  };

  nl_cache* raw = nullptr;
  if (int err = rtnl_cls_alloc_cache(sock_.get(), ifindex, kIngressHandle, &raw); err < 0) {
    return undo(NlError(err, "list filters on " + ifname));
  }
  CachePtr cache(raw);
  bool present = false, ours = false;
  for (nl_object* o = nl_cache_get_first(cache.get()); o != nullptr; o = nl_cache_get_next(o)) {
    auto* c = reinterpret_cast<rtnl_cls*>(o);
    if (rtnl_cls_get_prio(c) != kRedirectPrio) continue;
    const char* kind = rtnl_tc_get_kind(TC_CAST(c));
    present = true;
    ours = ours || (kind != nullptr && std::strcmp(kind, "u32") == 0);
  }
  if (present && ours && !renew) return Status::Ok();
  if (present) {  // delete everything at our priority (the u32 hash table with it)
    ClsPtr old(rtnl_cls_alloc());
    if (!old) return undo(Status::Internal("rtnl_cls_alloc failed"));
    rtnl_tc_set_ifindex(TC_CAST(old.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(old.get()), kIngressHandle);
    rtnl_cls_set_prio(old.get(), kRedirectPrio);
    rtnl_cls_set_protocol(old.get(), ETH_P_ALL);
    if (int err = rtnl_cls_delete(sock_.get(), old.get(), 0); err < 0 && -err != NLE_OBJ_NOTFOUND) {
      return undo(NlError(err, "delete old filter on " + ifname));
    }
  }

  ClsPtr cls(rtnl_cls_alloc());
  ActPtr act(rtnl_act_alloc());
  if (!cls || !act) return undo(Status::Internal("rtnl_cls_alloc/rtnl_act_alloc failed"));
  rtnl_tc_set_ifindex(TC_CAST(cls.get()), ifindex);
  rtnl_tc_set_parent(TC_CAST(cls.get()), kIngressHandle);
  rtnl_cls_set_prio(cls.get(), kRedirectPrio);
  rtnl_cls_set_protocol(cls.get(), ETH_P_ALL);
  if (int err = rtnl_tc_set_kind(TC_CAST(cls.get()), "u32"); err < 0) {
    return undo(NlError(err, "u32 filter"));
  }
  if (int err = rtnl_u32_add_key_uint32(cls.get(), 0, 0, 0, 0); err < 0) {  // matches all
    return undo(NlError(err, "u32 key"));
  }
  if (int err = rtnl_u32_set_cls_terminal(cls.get()); err < 0) {
    return undo(NlError(err, "u32 terminal"));
  }
  if (int err = rtnl_tc_set_kind(TC_CAST(act.get()), "mirred"); err < 0) {
    return undo(NlError(err, "mirred action"));
  }
  rtnl_mirred_set_action(act.get(), TCA_EGRESS_REDIR);
  rtnl_mirred_set_policy(act.get(), TC_ACT_STOLEN);
  rtnl_mirred_set_ifindex(act.get(), static_cast<uint32_t>(ifb_index));
  if (int err = rtnl_u32_add_action(cls.get(), act.get()); err < 0) {  // takes its own ref
    return undo(NlError(err, "attach mirred action"));
  }
  if (int err = rtnl_cls_add(sock_.get(), cls.get(), NLM_F_CREATE | NLM_F_EXCL); err < 0) {
    return undo(NlError(err, "add redirect filter on " + ifname));
  }
  return Status::Ok();
}

Status RealNodeOs::ApplyIngress(int ifindex, const std::string& ifname, int64_t bits_per_second,
                                int priority) {
  const std::string ifb = IfbName(ifname);
  bool created = false;
  STAR_ASSIGN_OR_RETURN(int ifb_index, EnsureIfb(ifb, &created));
  Status st = ApplyHtb(ifb_index, ifb, bits_per_second, priority);
  if (st.ok()) st = EnsureRedirect(ifindex, ifname, ifb_index, created);
  if (!st.ok() && created) (void)DeleteIfb(ifb);  // nothing half-applied
  return st;
}

// Deletes the ingress qdisc (its filters go with it), then the IFB device; idempotent.
Status RealNodeOs::RemoveIngress(int ifindex, const std::string& ifname) {
  STAR_ASSIGN_OR_RETURN(QdiscPtr q, OurIngressQdisc(ifindex));
  if (q) {
    int err = rtnl_qdisc_delete(sock_.get(), q.get());
    if (err < 0 && -err != NLE_OBJ_NOTFOUND) {
      return NlError(err, "delete ingress qdisc on " + ifname);
    }
  }
  return DeleteIfb(IfbName(ifname));
}

StatusOr<NetLimits> RealNodeOs::ReadNetLocked(int ifindex, const std::string& ifname) {
  NetLimits l;
  STAR_ASSIGN_OR_RETURN(std::optional<HtbRate> egress, ReadHtb(ifindex, ifname));
  if (egress) {
    l.egress_bits_per_second = egress->bits_per_second;
    l.priority = egress->priority;
  }
  STAR_ASSIGN_OR_RETURN(QdiscPtr ingress_q, OurIngressQdisc(ifindex));
  if (!ingress_q) return l;
  const std::string ifb = IfbName(ifname);
  StatusOr<LinkPtr> ifb_link = GetLink(ifb);
  if (!ifb_link.ok()) {
    if (ifb_link.status().code() == StatusCode::kNotFound) return l;
    return ifb_link.status();
  }
  STAR_ASSIGN_OR_RETURN(std::optional<HtbRate> ingress,
                        ReadHtb(rtnl_link_get_ifindex(ifb_link->get()), ifb));
  if (ingress) {
    l.ingress_bits_per_second = ingress->bits_per_second;
    if (!egress) l.priority = ingress->priority;
  }
  return l;
}

Status RealNodeOs::ApplyNetLocked(int ifindex, const std::string& ifname,
                                  const NetLimits& limits) {
  if (limits.egress_bits_per_second == 0) {
    STAR_RETURN_IF_ERROR(DeleteRoot(ifindex, ifname));
  } else {
    STAR_RETURN_IF_ERROR(ApplyHtb(ifindex, ifname, limits.egress_bits_per_second, limits.priority));
  }
  if (limits.ingress_bits_per_second == 0) return RemoveIngress(ifindex, ifname);
  return ApplyIngress(ifindex, ifname, limits.ingress_bits_per_second, limits.priority);
}

StatusOr<NetLimits> RealNodeOs::ReadNet(const std::string& ifname) {
  STAR_RETURN_IF_ERROR(internal::CheckIfname(ifname));
  std::lock_guard lock(mu_);
  STAR_ASSIGN_OR_RETURN(LinkPtr link, GetLink(ifname));
  return ReadNetLocked(rtnl_link_get_ifindex(link.get()), ifname);
}

Status RealNodeOs::WriteNet(const std::string& ifname, const NetLimits& limits) {
  STAR_RETURN_IF_ERROR(internal::CheckIfname(ifname));
  STAR_RETURN_IF_ERROR(internal::CheckNetLimits(limits));
  std::lock_guard lock(mu_);
  STAR_ASSIGN_OR_RETURN(LinkPtr link, GetLink(ifname));
  const int ifindex = rtnl_link_get_ifindex(link.get());
  STAR_ASSIGN_OR_RETURN(NetLimits before, ReadNetLocked(ifindex, ifname));
  Status st = ApplyNetLocked(ifindex, ifname, limits);
  if (!st.ok()) (void)ApplyNetLocked(ifindex, ifname, before);  // best effort: undo
  return st;
}

StatusOr<std::string> RealNodeOs::PodInterface(const std::string& cgroup) {
  STAR_RETURN_IF_ERROR(CheckExisting(cgroup));
  STAR_ASSIGN_OR_RETURN(internal::UniqueFd ns, internal::OpenCgroupNetns(root_ + "/" + cgroup, cgroup));
  STAR_ASSIGN_OR_RETURN(internal::NetnsId id, internal::NetnsOf(ns.get()));
  if (id == netns_) {
    return Status::FailedPrecondition("cgroup " + cgroup +
                                      ": its processes use the node's network namespace "
                                      "(host network); the node's interfaces are not the pod's");
  }
  STAR_ASSIGN_OR_RETURN(std::vector<internal::PodVeth> veths, internal::VethsIn(ns.get()));
  STAR_ASSIGN_OR_RETURN(internal::PodVeth veth, internal::ChoosePodVeth(veths, cgroup));
  std::lock_guard lock(mu_);
  rtnl_link* raw = nullptr;
  const std::string what = "cgroup " + cgroup + ": the peer (ifindex " +
                           std::to_string(veth.peer_ifindex) + ") of the pod's " + veth.name;
  if (int err = rtnl_link_get_kernel(sock_.get(), veth.peer_ifindex, nullptr, &raw); err < 0) {
    return NlError(err, what + " in the node's namespace");
  }
  LinkPtr peer(raw);
  const char* type = rtnl_link_get_type(peer.get());
  // Both ends must name each other: an ifindex alone may belong to an unrelated device.
  if (type == nullptr || std::strcmp(type, "veth") != 0 ||
      rtnl_link_get_link(peer.get()) != veth.ifindex) {
    return Status::NotFound(what + " is not in the node's namespace (ifindex " +
                            std::to_string(veth.peer_ifindex) + " here is " +
                            rtnl_link_get_name(peer.get()) + ", not its peer)");
  }
  return std::string(rtnl_link_get_name(peer.get()));
}

}  // namespace

std::string IfbName(const std::string& ifname) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "stbi%08x", Fnv1a32(ifname));
  return buf;
}

StatusOr<std::unique_ptr<NodeOs>> NewRealNodeOs(const RealNodeOsOptions& options) {
  if (options.allowed_prefix.empty()) {
    return Status::InvalidArgument("RealNodeOsOptions.allowed_prefix must not be empty");
  }
  STAR_RETURN_IF_ERROR(internal::CheckCgroupPath(options.allowed_prefix)
                           .WithPrefix("RealNodeOsOptions.allowed_prefix"));
  const std::string v2_root =
      options.cgroup_v2_root.empty() ? "/sys/fs/cgroup" : options.cgroup_v2_root;
  CgroupVersion version;
  if (options.version.has_value()) {
    version = *options.version;
  } else {
    std::ifstream in(v2_root + "/cgroup.controllers");
    std::string word;
    bool cpu = false;
    while (in >> word) cpu = cpu || word == "cpu";
    version = cpu ? CgroupVersion::kV2 : CgroupVersion::kV1;
  }
  std::string root;
  if (version == CgroupVersion::kV1) {
    if (!options.cgroup_v2_root.empty()) {
      return Status::InvalidArgument("cgroup_v2_root is only valid with cgroup v2");
    }
    STAR_RETURN_IF_ERROR(CgInitOnce());
    auto mnt = CgMountPoint("cpu");
    if (!mnt.ok()) return Status::FailedPrecondition(mnt.status().message());
    root = *mnt;
  } else {
    if (!IsDir(v2_root)) return Status::FailedPrecondition("no cgroup v2 root at " + v2_root);
    root = v2_root;
  }
  SockPtr sock(nl_socket_alloc());
  if (!sock) return Status::Unavailable("nl_socket_alloc failed");
  if (int err = nl_connect(sock.get(), NETLINK_ROUTE); err < 0) {
    return Status::Unavailable(std::string("netlink connect: ") + nl_geterror(err));
  }
  STAR_ASSIGN_OR_RETURN(internal::NetnsId netns, internal::CurrentNetns());
  return std::unique_ptr<NodeOs>(
      new RealNodeOs(version, root, options.allowed_prefix, std::move(sock), netns));
}

}  // namespace star::agent
