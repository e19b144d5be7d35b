#include "star/test_support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace star::test_support {
namespace {

using Clock = std::chrono::steady_clock;

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// fork + exec with the given descriptors as stdin/stdout/stderr; -1 on failure.
pid_t Spawn(const std::vector<std::string>& argv, int in, int out, int err) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  // Child: only async-signal-safe calls until exec.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  dup2(in, 0);
  dup2(out, 1);
  dup2(err, 2);
  for (int fd = 3; fd < 1024; ++fd) close(fd);
  execvp(args[0], args.data());
  _exit(127);
}

// Waits for `pid` until `deadline` (on a pidfd, which becomes readable when it exits);
// SIGKILLs it then. Returns the wait status.
int Reap(pid_t pid, Clock::time_point deadline, bool* killed) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    while (poll(&p, 1, RemainingMs(deadline)) < 0 && errno == EINTR) {
    }
    close(pidfd);
  }
  int status = 0;
  const pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == pid) return status;
  kill(pid, SIGKILL);
  if (killed != nullptr) *killed = true;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& stdin_text,
                         std::chrono::milliseconds timeout) {
  ProcessResult result;
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) return result;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return result;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    return result;
  }
  const auto deadline = Clock::now() + timeout;
  const pid_t pid = Spawn(argv, in[0], out[1], err[1]);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    for (int fd : {in[1], out[0], err[0]}) close(fd);
    return result;
  }
  signal(SIGPIPE, SIG_IGN);
  size_t written = 0;
  int write_fd = in[1];
  if (stdin_text.empty()) {
    close(write_fd);
    write_fd = -1;
  } else {
    fcntl(write_fd, F_SETFL, O_NONBLOCK);
  }
  int fds[2] = {out[0], err[0]};
  std::string* sinks[2] = {&result.out, &result.err};
  while ((fds[0] >= 0 || fds[1] >= 0) && Clock::now() < deadline) {
    pollfd p[3];
    int n = 0;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] >= 0) p[n++] = {fds[i], POLLIN, 0};
    }
    if (write_fd >= 0) p[n++] = {write_fd, POLLOUT, 0};
    if (poll(p, n, RemainingMs(deadline)) <= 0) continue;
    for (int k = 0; k < n; ++k) {
      if (p[k].revents == 0) continue;
      if (p[k].fd == write_fd) {
        const ssize_t w = write(write_fd, stdin_text.data() + written, stdin_text.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if (w < 0 || written == stdin_text.size()) {
          close(write_fd);
          write_fd = -1;
        }
        continue;
      }
      for (int i = 0; i < 2; ++i) {
        if (p[k].fd != fds[i]) continue;
        char buf[4096];
        const ssize_t r = read(fds[i], buf, sizeof(buf));
        if (r > 0) {
          sinks[i]->append(buf, static_cast<size_t>(r));
        } else if (r == 0 || errno != EINTR) {
          close(fds[i]);
          fds[i] = -1;
        }
      }
    }
  }
  for (int fd : {fds[0], fds[1], write_fd}) {
    if (fd >= 0) close(fd);
  }
  bool killed = false;
  const int status = Reap(pid, deadline, &killed);
  result.timed_out = killed;
  result.exit_code = !killed && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

BackgroundProcess::~BackgroundProcess() { Stop(); }

bool BackgroundProcess::Start(const std::vector<std::string>& argv, const std::string& stderr_path) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return false;
  const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (err < 0 || in < 0) {
    for (int fd : {out[0], out[1], err, in}) {
      if (fd >= 0) close(fd);
    }
    return false;
  }
  pid_ = Spawn(argv, in, out[1], err);
  close(out[1]);
  close(err);
  close(in);
  if (pid_ < 0) {
    close(out[0]);
    return false;
  }
  out_fd_ = out[0];
  return true;
}

std::optional<std::string> BackgroundProcess::WaitForLine(const std::string& prefix, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    size_t newline;
    while ((newline = pending_.find('\n')) != std::string::npos) {
      std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      if (line.rfind(prefix, 0) == 0) return line;
    }
    if (out_fd_ < 0 || Clock::now() >= deadline) return std::nullopt;
    pollfd p{out_fd_, POLLIN, 0};
    if (poll(&p, 1, RemainingMs(deadline)) <= 0) continue;
    char buf[4096];
    const ssize_t r = read(out_fd_, buf, sizeof(buf));
    if (r > 0) {
      pending_.append(buf, static_cast<size_t>(r));
    } else if (r == 0 || errno != EINTR) {
      close(out_fd_);
      out_fd_ = -1;
    }
  }
}

int BackgroundProcess::Stop(std::chrono::milliseconds grace) {
  if (out_fd_ >= 0) {
    close(out_fd_);
    out_fd_ = -1;
  }
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  const int status = Reap(pid_, Clock::now() + grace, nullptr);
  pid_ = -1;
  return status;
}

}  // namespace star::test_support
