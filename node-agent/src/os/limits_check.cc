#include "os/limits_check.h"

#include <sstream>

namespace star::agent::internal {

Status CheckCgroupPath(const std::string& cgroup) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("cgroup path \"" + cgroup + "\": " + why);
  };
  if (cgroup.empty()) return bad("empty");
  if (cgroup.front() == '/') return bad("must be relative to the hierarchy root");
  std::stringstream ss(cgroup);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) return bad("empty component");
    if (part == "." || part == "..") return bad("must not contain . or ..");
  }
  if (cgroup.back() == '/') return bad("trailing /");
  return Status::Ok();
}

Status CheckIfname(const std::string& ifname) {
  if (ifname.empty() || ifname.size() > 15) {
    return Status::InvalidArgument("interface name \"" + ifname + "\": must be 1..15 chars");
  }
  for (char c : ifname) {
    if (c == '/' || c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '\0') {
      return Status::InvalidArgument("interface name \"" + ifname + "\": invalid character");
    }
  }
  return Status::Ok();
}

Status CheckCpuLimits(const CpuLimits& l) {
  if (l.quota_us != -1 && l.quota_us < 1000) {
    return Status::InvalidArgument("cpu quota_us must be -1 or >= 1000, got " +
                                   std::to_string(l.quota_us));
  }
  if (l.period_us < 1000 || l.period_us > 1000000) {
    return Status::InvalidArgument("cpu period_us must be in 1000..1000000, got " +
                                   std::to_string(l.period_us));
  }
  if (l.weight < 1 || l.weight > 10000) {
    return Status::InvalidArgument("cpu weight must be in 1..10000, got " +
                                   std::to_string(l.weight));
  }
  return Status::Ok();
}

Status CheckNetLimits(const NetLimits& l) {
  if (l.egress_bits_per_second < 0 || l.ingress_bits_per_second < 0) {
    return Status::InvalidArgument("bandwidth limits must be >= 0 (0 = unlimited)");
  }
  if (l.priority < 0 || l.priority > 7) {
    return Status::InvalidArgument("priority must be in 0..7, got " + std::to_string(l.priority));
  }
  return Status::Ok();
}

}  // namespace star::agent::internal
