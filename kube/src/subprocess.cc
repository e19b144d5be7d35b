// posix_spawn with two pipes, read with poll until both close or the deadline passes.
#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace star::kube {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<char*> Pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Reads both pipes until they close or `deadline`; false when the deadline passed first.
bool Drain(int out_fd, int err_fd, Clock::time_point deadline, size_t max_output, ProcessOutput* result) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&result->out, &result->err};
  int open = 2;
  while (open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    const int ready = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) return false;
    for (int i = 0; i < 2 && ready > 0; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, std::min(static_cast<size_t>(n), max_output - std::min(max_output, sinks[i]->size())));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open;
      }
    }
  }
  return true;
}

}  // namespace

StatusOr<ProcessOutput> RunProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                   std::chrono::milliseconds timeout, size_t max_output) {
  if (argv.empty() || argv[0].empty()) return Status::InvalidArgument("run: no command");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::Internal(std::string("run: pipe: ") + std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return Status::Internal(std::string("run: pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  pid_t pid = -1;
  const std::vector<char*> args = Pointers(argv), envp = Pointers(env);
  const int spawned = ::posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  if (spawned != 0) {
    ::close(out[0]);
    ::close(err[0]);
    const std::string why = argv[0] + ": " + std::strerror(spawned);
    return spawned == ENOENT || spawned == EACCES ? Status::NotFound(why) : Status::Internal(why);
  }
  ProcessOutput result;
  result.timed_out = !Drain(out[0], err[0], Clock::now() + timeout, max_output, &result);
  if (result.timed_out) ::kill(pid, SIGKILL);
  ::close(out[0]);
  ::close(err[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  return result;
}

}  // namespace star::kube
