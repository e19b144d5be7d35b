#include "star/agent/real_node_os.h"

#include <libcgroup.h>
#include <linux/pkt_sched.h>
#include <netlink/netlink.h>
#include <netlink/route/class.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/tc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "os/limits_check.h"

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
using CachePtr = std::unique_ptr<nl_cache, NlDel<nl_cache, nl_cache_free>>;
using SockPtr = std::unique_ptr<nl_sock, NlDel<nl_sock, nl_socket_free>>;

constexpr uint32_t kRootHandle = TC_HANDLE(1, 0);
constexpr uint32_t kClassHandle = TC_HANDLE(1, 1);

class RealNodeOs final : public NodeOs {
 public:
  RealNodeOs(CgroupVersion v, std::string root, std::string prefix, SockPtr sock)
      : version_(v), root_(std::move(root)), prefix_(std::move(prefix)), sock_(std::move(sock)) {}

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
    l.weight = std::clamp<int64_t>(std::llround(static_cast<double>(shares) * 100.0 / 1024.0),
                                   1, 10000);
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

  const CgroupVersion version_;
  const std::string root_;
  const std::string prefix_;
  std::mutex mu_;  // guards sock_ and serialises libcgroup use
  SockPtr sock_;
};

StatusOr<NetLimits> RealNodeOs::ReadNet(const std::string& ifname) {
  STAR_RETURN_IF_ERROR(internal::CheckIfname(ifname));
  std::lock_guard lock(mu_);
  STAR_ASSIGN_OR_RETURN(LinkPtr link, GetLink(ifname));
  const int ifindex = rtnl_link_get_ifindex(link.get());
  STAR_ASSIGN_OR_RETURN(QdiscPtr q, OurRootQdisc(ifindex));
  NetLimits l;
  if (!q) return l;
  nl_cache* raw = nullptr;
  if (int err = rtnl_class_alloc_cache(sock_.get(), ifindex, &raw); err < 0) {
    return NlError(err, "list classes on " + ifname);
  }
  CachePtr cache(raw);
  ClassPtr cls(rtnl_class_get(cache.get(), ifindex, kClassHandle));
  if (!cls) return l;  // qdisc without our class: treated as unlimited
  uint64_t bytes_per_s = 0;
  if (int err = rtnl_htb_get_rate64(cls.get(), &bytes_per_s); err < 0) {
    return NlError(err, "read htb rate on " + ifname);
  }
  l.egress_bits_per_second = static_cast<int64_t>(bytes_per_s * 8);
  l.priority = static_cast<int>(rtnl_htb_get_prio(cls.get()));
  return l;
}

Status RealNodeOs::WriteNet(const std::string& ifname, const NetLimits& limits) {
  STAR_RETURN_IF_ERROR(internal::CheckIfname(ifname));
  STAR_RETURN_IF_ERROR(internal::CheckNetLimits(limits));
  if (limits.ingress_bits_per_second != 0) {
    return Status::Unimplemented("ingress limits are not implemented (interface " + ifname +
                                 "); nothing was changed");
  }
  std::lock_guard lock(mu_);
  STAR_ASSIGN_OR_RETURN(LinkPtr link, GetLink(ifname));
  const int ifindex = rtnl_link_get_ifindex(link.get());
  if (limits.egress_bits_per_second == 0) return DeleteRoot(ifindex, ifname);

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
  const auto bytes = static_cast<uint64_t>(limits.egress_bits_per_second / 8);
  if (st.ok()) {
    rtnl_htb_set_rate64(cls.get(), bytes);
    rtnl_htb_set_ceil64(cls.get(), bytes);
    rtnl_htb_set_prio(cls.get(), static_cast<uint32_t>(limits.priority));
    if (int err = rtnl_class_add(sock_.get(), cls.get(), NLM_F_CREATE | NLM_F_REPLACE); err < 0) {
      st = NlError(err, "add htb class on " + ifname);
    }
  }
  if (!st.ok() && fresh) (void)DeleteRoot(ifindex, ifname);  // nothing half-applied
  return st;
}

}  // namespace

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
  return std::unique_ptr<NodeOs>(
      new RealNodeOs(version, root, options.allowed_prefix, std::move(sock)));
}

}  // namespace star::agent
