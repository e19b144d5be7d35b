#include "process_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

extern char** environ;

namespace star::shim::harness {
namespace {

constexpr const char* kSignalFdVar = "STAR_TEST_SIGNAL_FD";
using Clock = std::chrono::steady_clock;

std::string NameOf(const std::string& assignment) {
  return assignment.substr(0, assignment.find('='));
}

// A pidfd for `pid` (readable once it exits), or -1 where the kernel lacks pidfd_open.
int OpenPidFd(pid_t pid) {
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  return fd >= 0 ? static_cast<int>(fd) : -1;
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string DescribeWaitStatus(int st) {
  if (st == -1) return "not reaped";
  if (WIFEXITED(st)) return "exited with code " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "killed by signal " + std::to_string(WTERMSIG(st));
  return "wait status " + std::to_string(st);
}

ProcessGroup::ProcessGroup() {
  int fds[2];
  if (::pipe(fds) == 0) {
    signal_read_ = fds[0];
    signal_write_ = fds[1];  // inherited by the workers across exec
    ::fcntl(signal_read_, F_SETFD, FD_CLOEXEC);
  }
}

ProcessGroup::~ProcessGroup() {
  for (pid_t pid : pids_) {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  if (signal_read_ >= 0) ::close(signal_read_);
  if (signal_write_ >= 0) ::close(signal_write_);
}

StatusOr<size_t> ProcessGroup::Spawn(const std::string& gtest_filter,
                                     const std::vector<std::string>& env,
                                     const std::string& log_path) {
  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::Internal("process group: cannot resolve /proc/self/exe: " + ec.message());
  return SpawnProgram(self, {"--gtest_filter=" + gtest_filter}, env, log_path);
}

StatusOr<size_t> ProcessGroup::SpawnProgram(const std::string& program,
                                            const std::vector<std::string>& args,
                                            const std::vector<std::string>& env,
                                            const std::string& log_path) {
  if (signal_write_ < 0) {
    return Status::FailedPrecondition("process group: no signal pipe (Spawn after WaitForSignals?)");
  }
  // Everything the child needs is prepared before fork: between fork and exec it may only
  // make async-signal-safe calls.
  std::string path = program;
  std::vector<std::string> arg_copies = args;
  std::vector<std::string> vars = env;
  vars.push_back(std::string(kSignalFdVar) + "=" + std::to_string(signal_write_));
  std::vector<std::string> names;
  for (const auto& v : vars) names.push_back(NameOf(v));
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::find(names.begin(), names.end(), NameOf(*e)) == names.end()) vars.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::vector<char*> argv = {path.data()};
  for (auto& a : arg_copies) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) return Status::Unavailable(std::string("process group: fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Die with the test, even if it crashes before reaping.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execve(path.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  pids_.push_back(pid);
  return pids_.size() - 1;
}

Status ProcessGroup::WaitForSignals(int count, std::chrono::milliseconds timeout) {
  if (signal_write_ >= 0) {
    ::close(signal_write_);  // only the workers hold it now: EOF once they all exit
    signal_write_ = -1;
  }
  if (signal_read_ < 0) return Status::FailedPrecondition("process group: no signal pipe");
  const auto deadline = Clock::now() + timeout;
  int got = 0;
  while (got < count) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{signal_read_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    char buf[64];
    const ssize_t n = ::read(signal_read_, buf, std::min(sizeof(buf), static_cast<size_t>(count - got)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status::Unavailable("process group: every worker exited after " +
                                 std::to_string(got) + " of " + std::to_string(count) +
                                 " signals");
    }
    got += static_cast<int>(n);
  }
  if (got < count) {
    return Status::DeadlineExceeded("process group: " + std::to_string(got) + " of " +
                                    std::to_string(count) + " signals within " +
                                    std::to_string(timeout.count()) + " ms");
  }
  return Status::Ok();
}

Status ProcessGroup::Kill(size_t index) {
  if (index >= pids_.size() || pids_[index] <= 0) {
    return Status::InvalidArgument("process group: no running process " + std::to_string(index));
  }
  if (::kill(pids_[index], SIGKILL) != 0) {
    return Status::Unavailable(std::string("process group: kill: ") + std::strerror(errno));
  }
  return Status::Ok();
}

std::vector<int> ProcessGroup::ReapAll(std::chrono::milliseconds limit) {
  std::vector<int> statuses(pids_.size(), -1);
  std::vector<pollfd> fds(pids_.size(), pollfd{-1, POLLIN, 0});
  bool all_pidfds = true;
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (pids_[i] <= 0) continue;
    fds[i].fd = OpenPidFd(pids_[i]);
    all_pidfds = all_pidfds && fds[i].fd >= 0;
  }
  const auto deadline = Clock::now() + limit;
  while (true) {
    size_t left = 0;
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (pids_[i] <= 0) continue;
      int st = 0;
      if (::waitpid(pids_[i], &st, WNOHANG) == pids_[i]) {
        statuses[i] = st;
        pids_[i] = 0;
        if (fds[i].fd >= 0) ::close(fds[i].fd);
        fds[i].fd = -1;
      } else {
        ++left;
      }
    }
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left == 0 || remaining <= 0) break;
    // Wakes when a worker exits (pidfds) or, without pidfd support, re-checks every 10 ms.
    const int wait_ms = all_pidfds ? static_cast<int>(remaining)
                                   : static_cast<int>(std::min<long long>(remaining, 10));
    (void)::poll(fds.data(), fds.size(), wait_ms);
  }
  for (auto& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  return statuses;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

Status SignalParent() {
  const std::string fd = Env(kSignalFdVar);
  if (fd.empty()) return Status::Unavailable("not started by a ProcessGroup (no signal pipe)");
  const char byte = 1;
  ssize_t n;
  do {
    n = ::write(std::atoi(fd.c_str()), &byte, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) return Status::Unavailable(std::string("signal pipe: ") + std::strerror(errno));
  return Status::Ok();
}

}  // namespace star::shim::harness
