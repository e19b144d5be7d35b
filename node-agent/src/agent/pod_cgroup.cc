#include "star/agent/pod_cgroup.h"

#include <algorithm>
#include <optional>
#include <string>

namespace star::agent {

StatusOr<CgroupDriver> ParseCgroupDriver(std::string_view s) {
  if (s == "cgroupfs") return CgroupDriver::kCgroupfs;
  if (s == "systemd") return CgroupDriver::kSystemd;
  return Status::InvalidArgument("driver: must be \"cgroupfs\" or \"systemd\", got \"" +
                                 std::string(s) + "\"");
}

std::string_view CgroupDriverName(CgroupDriver d) {
  return d == CgroupDriver::kSystemd ? "systemd" : "cgroupfs";
}

std::string_view QosClassName(QosClass q) {
  switch (q) {
    case QosClass::kGuaranteed: return "Guaranteed";
    case QosClass::kBurstable: return "Burstable";
    case QosClass::kBestEffort: return "BestEffort";
  }
  return "Unknown";
}

namespace {

// Printable form of untrusted input for error messages: control characters escaped.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 80)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  if (s.size() > 80) out += "...";
  return out + "\"";
}

}  // namespace

Status CheckPodUid(std::string_view uid, std::string_view field) {
  if (uid.empty() || uid.size() > 64) {
    return Status::InvalidArgument(std::string(field) + ": must be 1..64 characters, got " +
                                   std::to_string(uid.size()));
  }
  const bool ok = std::all_of(uid.begin(), uid.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
           c == '-';
  });
  if (!ok) {
    return Status::InvalidArgument(std::string(field) +
                                   ": must be a pod uid (hex digits and '-'), got " + Quote(uid));
  }
  return Status::Ok();
}

Status CheckInterfaceName(std::string_view ifname, std::string_view field) {
  if (ifname.empty() || ifname.size() > 15) {
    return Status::InvalidArgument(std::string(field) +
                                   ": must be 1..15 characters (an interface name), got " +
                                   Quote(ifname));
  }
  const bool bad = ifname == "." || ifname == ".." ||
                   std::any_of(ifname.begin(), ifname.end(), [](char c) {
                     auto u = static_cast<unsigned char>(c);
                     return c == '/' || c == ':' || u <= 0x20 || u >= 0x7f;
                   });
  if (bad) {
    return Status::InvalidArgument(std::string(field) + ": not a valid interface name: " +
                                   Quote(ifname));
  }
  return Status::Ok();
}

StatusOr<std::string> PodCgroup(CgroupDriver driver, QosClass qos, std::string_view uid) {
  STAR_RETURN_IF_ERROR(CheckPodUid(uid));
  std::string id(uid);
  if (driver == CgroupDriver::kCgroupfs) {
    switch (qos) {
      case QosClass::kGuaranteed: return "kubepods/pod" + id;
      case QosClass::kBurstable: return "kubepods/burstable/pod" + id;
      case QosClass::kBestEffort: return "kubepods/besteffort/pod" + id;
    }
  }
  std::replace(id.begin(), id.end(), '-', '_');
  switch (qos) {
    case QosClass::kGuaranteed: return "kubepods.slice/kubepods-pod" + id + ".slice";
    case QosClass::kBurstable:
      return "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + id + ".slice";
    case QosClass::kBestEffort:
      return "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + id + ".slice";
  }
  return Status::Internal("unknown QoS class");
}

Status CheckCgroupRoot(std::string_view root, std::string_view field) {
  if (root.empty()) return Status::Ok();
  bool ok = root.front() != '/' && root.back() != '/';
  size_t start = 0;
  while (ok && start <= root.size()) {
    size_t end = root.find('/', start);
    if (end == std::string_view::npos) end = root.size();
    std::string_view part = root.substr(start, end - start);
    ok = !part.empty() && part != "." && part != ".." &&
         std::all_of(part.begin(), part.end(), [](char c) {
           auto u = static_cast<unsigned char>(c);
           return u > 0x20 && u < 0x7f;
         });
    start = end + 1;
  }
  if (!ok) {
    return Status::InvalidArgument(std::string(field) + ": must be a relative cgroup path, got " +
                                   Quote(root));
  }
  return Status::Ok();
}

StatusOr<ResolvedPodCgroup> ResolvePodCgroup(NodeOs& os, CgroupDriver driver,
                                             std::string_view uid, std::string_view root) {
  STAR_RETURN_IF_ERROR(CheckPodUid(uid));
  STAR_RETURN_IF_ERROR(CheckCgroupRoot(root));
  std::optional<ResolvedPodCgroup> found;
  for (QosClass q : {QosClass::kGuaranteed, QosClass::kBurstable, QosClass::kBestEffort}) {
    STAR_ASSIGN_OR_RETURN(std::string path, PodCgroup(driver, q, uid));
    if (!root.empty()) path = std::string(root) + "/" + path;
    STAR_ASSIGN_OR_RETURN(bool exists, os.CgroupExists(path));
    if (!exists) continue;
    if (found) {
      return Status::FailedPrecondition("pod " + std::string(uid) + ": cgroups " +
                                        found->cgroup + " and " + path + " both exist");
    }
    found = ResolvedPodCgroup{q, path};
  }
  if (!found) {
    return Status::NotFound("pod " + std::string(uid) + ": no cgroup under the " +
                            std::string(CgroupDriverName(driver)) + " pods hierarchy");
  }
  return *found;
}

}  // namespace star::agent
