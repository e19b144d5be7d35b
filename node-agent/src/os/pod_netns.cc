#include "os/pod_netns.h"

#include <fcntl.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <thread>

namespace star::agent::internal {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<NetnsId> NetnsOf(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return Status::Internal(std::string("stat of a network namespace: ") + std::strerror(errno));
  }
  return NetnsId{st.st_dev, st.st_ino};
}

StatusOr<NetnsId> CurrentNetns() {
  UniqueFd fd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return Status::Internal(std::string("open /proc/thread-self/ns/net: ") + std::strerror(errno));
  }
  return NetnsOf(fd.get());
}

namespace {

constexpr int kMaxDepth = 4;
constexpr int kMaxDirs = 256;

std::set<pid_t> ProcsOf(const std::string& dir) {
  std::set<pid_t> pids;
  std::ifstream in(dir + "/cgroup.procs");
  pid_t pid = 0;
  while (in >> pid) {
    if (pid > 0) pids.insert(pid);  // 0: a process outside our pid namespace
  }
  return pids;
}

// The namespace of a process listed in `dir`, checked to be still listed once opened.
std::optional<UniqueFd> OpenNetnsOfProcIn(const std::string& dir) {
  for (pid_t pid : ProcsOf(dir)) {
    UniqueFd fd(::open(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) continue;        // exited meanwhile
    if (!ProcsOf(dir).count(pid)) continue;  // exited, and its pid may be another's now
    return fd;
  }
  return std::nullopt;
}

}  // namespace

StatusOr<UniqueFd> OpenCgroupNetns(const std::string& dir, const std::string& label) {
  std::deque<std::pair<std::string, int>> queue{{dir, 0}};
  for (int seen = 0; !queue.empty() && seen < kMaxDirs; ++seen) {
    auto [d, depth] = queue.front();
    queue.pop_front();
    if (auto fd = OpenNetnsOfProcIn(d)) return std::move(*fd);
    if (depth >= kMaxDepth) continue;
    std::error_code ec;
    std::vector<std::string> children;
    for (const auto& e : std::filesystem::directory_iterator(d, ec)) {
      if (e.is_directory(ec)) children.push_back(e.path().string());
    }
    std::sort(children.begin(), children.end());
    for (auto& c : children) queue.emplace_back(std::move(c), depth + 1);
  }
  return Status::NotFound("no process in cgroup " + label + " (not started yet, or gone)");
}

namespace {

struct SockFree {
  void operator()(nl_sock* s) const { nl_socket_free(s); }
};
struct CacheFree {
  void operator()(nl_cache* c) const { nl_cache_free(c); }
};

// Lists the veths of the calling thread's network namespace whose peer is elsewhere.
StatusOr<std::vector<PodVeth>> VethsHere() {
  std::unique_ptr<nl_sock, SockFree> sock(nl_socket_alloc());
  if (!sock) return Status::Unavailable("nl_socket_alloc failed");
  if (int err = nl_connect(sock.get(), NETLINK_ROUTE); err < 0) {
    return Status::Unavailable(std::string("netlink connect in the pod's namespace: ") +
                               nl_geterror(err));
  }
  nl_cache* raw = nullptr;
  if (int err = rtnl_link_alloc_cache(sock.get(), AF_UNSPEC, &raw); err < 0) {
    return Status::Unavailable(std::string("list the pod's interfaces: ") + nl_geterror(err));
  }
  std::unique_ptr<nl_cache, CacheFree> cache(raw);
  std::vector<PodVeth> out;
  for (nl_object* o = nl_cache_get_first(cache.get()); o != nullptr; o = nl_cache_get_next(o)) {
    auto* link = reinterpret_cast<rtnl_link*>(o);
    const char* type = rtnl_link_get_type(link);
    int32_t netnsid = -1;
    // A veth whose peer is in another namespace carries that namespace's id.
    if (type == nullptr || std::strcmp(type, "veth") != 0 ||
        rtnl_link_get_link_netnsid(link, &netnsid) != 0 || rtnl_link_get_link(link) <= 0) {
      continue;
    }
    out.push_back({rtnl_link_get_name(link), rtnl_link_get_ifindex(link), rtnl_link_get_link(link)});
  }
  return out;
}

}  // namespace

StatusOr<std::vector<PodVeth>> VethsIn(int netns_fd) {
  StatusOr<std::vector<PodVeth>> out = Status::Internal("not run");
  // setns changes only this thread's namespace; the thread ends with it.
  std::thread t([&] {
    if (::setns(netns_fd, CLONE_NEWNET) != 0) {
      out = Status::Unavailable(std::string("enter the pod's network namespace: ") +
                                std::strerror(errno));
      return;
    }
    out = VethsHere();
  });
  t.join();
  return out;
}

StatusOr<PodVeth> ChoosePodVeth(const std::vector<PodVeth>& veths, const std::string& label) {
  if (veths.size() == 1) return veths.front();
  std::string names;
  for (const PodVeth& v : veths) {
    if (v.name == "eth0") return v;
    names += (names.empty() ? "" : ", ") + v.name;
  }
  if (veths.empty()) {
    return Status::NotFound("the network namespace of cgroup " + label +
                            " has no veth with a peer outside it (not set up yet, or gone)");
  }
  return Status::FailedPrecondition("the network namespace of cgroup " + label +
                                    " has several veths (" + names + ") and no eth0");
}

}  // namespace star::agent::internal
