#include "local/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

namespace star::local {

std::string Tail(const std::string& path, int lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0; i < all.size();
       ++i) {
    out += "\n    " + all[i];
  }
  return out;
}

StatusOr<int> Supervisor::Spawn(Proc proc, Sandbox::SpawnSpec spec) {
  int fd = ::open(proc.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Unavailable(proc.log + ": " + std::strerror(errno));
  if (spec.stdout_fd < 0) spec.stdout_fd = fd;
  spec.stderr_fd = fd;
  auto pid = sandbox_.Spawn(spec);
  ::close(fd);
  if (!pid.ok()) return pid.status().WithPrefix(proc.name);
  proc.pid = *pid;
  proc.running = true;
  procs_.push_back(proc);
  return static_cast<int>(procs_.size() - 1);
}

Status Supervisor::Reap(int* workers_done) {
  *workers_done = 0;
  for (Proc& p : procs_) {
    if (p.running && ::waitpid(p.pid, &p.wait_status, WNOHANG) == p.pid) p.running = false;
    if (p.running) continue;
    const bool clean = WIFEXITED(p.wait_status) && WEXITSTATUS(p.wait_status) == 0;
    if (p.role == Role::kWorker && clean) ++*workers_done;
    if (!clean && p.role != Role::kNeighbor) {
      std::string how = WIFSIGNALED(p.wait_status)
                            ? "was killed by signal " + std::to_string(WTERMSIG(p.wait_status))
                            : "exited with status " + std::to_string(WEXITSTATUS(p.wait_status));
      return Status::Internal(p.name + " " + how + "; the end of " + p.log + ":" + Tail(p.log, 8));
    }
  }
  return Status::Ok();
}

bool Supervisor::Running(Role role) const {
  for (const Proc& p : procs_) {
    if (p.role == role && p.running) return true;
  }
  return false;
}

void Supervisor::Kill(int index) {
  if (index < 0 || index >= static_cast<int>(procs_.size())) return;
  Proc& p = procs_[static_cast<size_t>(index)];
  if (!p.running) return;
  ::kill(-p.pid, SIGKILL);
  ::waitpid(p.pid, &p.wait_status, 0);
  p.running = false;
}

void Supervisor::StopAll() {
  // Workers and servers get SIGTERM first (a trainer may flush), everything SIGKILL after
  // a bounded grace period; the sandbox's teardown kills whatever is left in its cgroups.
  for (Proc& p : procs_) {
    if (p.running) ::kill(-p.pid, p.role == Role::kNeighbor ? SIGKILL : SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (Proc& p : procs_) {
    while (p.running) {
      pid_t r = ::waitpid(p.pid, &p.wait_status, WNOHANG);
      if (r == p.pid || r < 0) {
        p.running = false;
      } else if (std::chrono::steady_clock::now() > deadline) {
        ::kill(-p.pid, SIGKILL);
        ::waitpid(p.pid, &p.wait_status, 0);
        p.running = false;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
}

}  // namespace star::local
