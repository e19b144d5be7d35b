// The pieces of RealNodeOs::PodInterface that do not need its netlink socket: finding a
// process of a pod's cgroup, opening its network namespace, and listing the veths inside
// that namespace. Internal to the real NodeOs.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::agent::internal {

// An open file descriptor, closed when it goes.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// Identity of a network namespace: its nsfs inode.
struct NetnsId {
  dev_t dev = 0;
  ino_t ino = 0;
  friend bool operator==(const NetnsId&, const NetnsId&) = default;
};

// The network namespace of the calling thread. Internal on a failed stat.
[[nodiscard]] StatusOr<NetnsId> CurrentNetns();
// The namespace `fd` refers to.
[[nodiscard]] StatusOr<NetnsId> NetnsOf(int fd);

// The network namespace of a process in the cgroup directory `dir` (absolute) or in one of
// its descendants (searched breadth first, at most 4 levels and 256 directories, as a pod's
// processes sit in its containers' cgroups). The process is checked to be still in that
// cgroup after its namespace was opened, so a pid reused by another process is never
// taken for the pod's. NotFound when no such process exists; `label` names the cgroup in
// messages.
[[nodiscard]] StatusOr<UniqueFd> OpenCgroupNetns(const std::string& dir, const std::string& label);

// A veth inside a pod's namespace whose peer lives in another namespace.
struct PodVeth {
  std::string name;
  int ifindex = 0;       // in the pod's namespace
  int peer_ifindex = 0;  // in the peer's namespace (IFLA_LINK)
};

// The veths of the namespace `netns_fd` whose peers live in another namespace, listed
// through netlink from a helper thread that enters the namespace (the caller's threads
// stay where they are). Internal / Unavailable on netlink or setns failures.
[[nodiscard]] StatusOr<std::vector<PodVeth>> VethsIn(int netns_fd);

// The pod's own veth among `veths`: the only one, else the one named eth0. NotFound
// naming `label` when there is none; FailedPrecondition when there are several and no eth0.
[[nodiscard]] StatusOr<PodVeth> ChoosePodVeth(const std::vector<PodVeth>& veths,
                                              const std::string& label);

}  // namespace star::agent::internal
