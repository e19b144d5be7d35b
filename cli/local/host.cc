#include "local/host.h"

namespace star::local {

Status CheckCgroupPath(const std::string& cgroup) {
  if (cgroup.empty() || cgroup.front() == '/' || cgroup.back() == '/' ||
      cgroup.find("//") != std::string::npos) {
    return Status::InvalidArgument("cgroup \"" + cgroup +
                                   "\": must be a relative path without empty components");
  }
  size_t start = 0;
  while (start <= cgroup.size()) {
    size_t end = cgroup.find('/', start);
    if (end == std::string::npos) end = cgroup.size();
    const std::string part = cgroup.substr(start, end - start);
    if (part == "." || part == "..") {
      return Status::InvalidArgument("cgroup \"" + cgroup + "\": \".\" and \"..\" are not allowed");
    }
    start = end + 1;
  }
  return Status::Ok();
}

std::string ParentCgroup(const std::string& cgroup) {
  const size_t slash = cgroup.rfind('/');
  return slash == std::string::npos ? std::string() : cgroup.substr(0, slash);
}

}  // namespace star::local
