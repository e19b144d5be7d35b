#include "local/netns_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

extern char** environ;

namespace star::local {
namespace {

constexpr const char* kNetnsDir = "/run/netns";

bool IsExecutableFile(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string Errno(int e) { return std::strerror(e); }

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

}  // namespace

StatusOr<std::string> FindProgram(const std::string& name, Fallback fallback) {
  if (name.empty()) return Status::InvalidArgument("program name is empty");
  if (name.find('/') != std::string::npos) {
    if (IsExecutableFile(name)) return name;
    return Status::NotFound("program \"" + name + "\" not found or not executable");
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  if (fallback == Fallback::kSystemDirs) dirs += ":/usr/sbin:/sbin:/usr/bin:/bin";
  if (fallback == Fallback::kNone && path == nullptr) dirs = "/usr/bin:/bin";
  std::stringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (IsExecutableFile(candidate)) return candidate;
  }
  return Status::NotFound("program \"" + name + "\" not found in " +
                          (fallback == Fallback::kSystemDirs
                               ? "$PATH, /usr/sbin, /sbin, /usr/bin or /bin"
                               : "$PATH"));
}

namespace {

// Starts `program` with `argv`: stdin from /dev/null, stdout and stderr to the write
// ends given, no other descriptor, default signal dispositions and an empty mask.
StatusOr<pid_t> Spawn(const std::string& program, const std::vector<std::string>& argv, const Fd& out_w,
                      const Fd& err_w) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  if (posix_spawn_file_actions_init(&actions) != 0) {
    return Status::Internal("posix_spawn_file_actions_init");
  }
  if (posix_spawnattr_init(&attr) != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return Status::Internal("posix_spawnattr_init");
  }
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.get(), 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, program.c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::Internal("start " + FormatCommand(argv) + ": " + Errno(rc));
  return pid;
}

// How reading a child's output ended.
struct DrainEnd {
  bool timed_out = false;
  bool open = false;  // a pipe was left unread to its end (timeout or poll error)
};

// Reads both pipes to their end into result.out and result.err, within the deadline.
DrainEnd Drain(const Fd& out_r, const Fd& err_r, std::chrono::steady_clock::time_point deadline,
               CommandResult& result) {
  bool out_open = true, err_open = true, timed_out = false;
  char buf[4096];
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out_r.get() : -1, POLLIN, 0},
                     {err_open ? err_r.get() : -1, POLLIN, 0}};
    const int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(got));
    }
  }
  return {timed_out, out_open || err_open};
}

// Waits for `pid` to exit (retrying on EINTR); its wait status.
StatusOr<int> Reap(pid_t pid, const std::vector<std::string>& argv) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return Status::Internal("waitpid " + FormatCommand(argv) + ": " + Errno(errno));
    }
  }
  return status;
}

}  // namespace

StatusOr<std::string> FindSystemProgram(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) {
    return Status::InvalidArgument("system program \"" + name + "\": want a bare name such as \"ip\"");
  }
  for (const char* dir : kSystemProgramDirs) {
    const std::string candidate = std::string(dir) + "/" + name;
    if (IsExecutableFile(candidate)) return candidate;
  }
  return Status::NotFound("program \"" + name + "\" not found in /usr/sbin, /sbin, /usr/bin or /bin");
}

StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                   std::chrono::milliseconds timeout) {
  if (argv.empty()) return Status::InvalidArgument("RunCommand: argv is empty");
  STAR_ASSIGN_OR_RETURN(const std::string program, argv[0].find('/') != std::string::npos
                                                        ? FindProgram(argv[0])
                                                        : FindSystemProgram(argv[0]));

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Status::Internal("pipe: " + Errno(errno));
  Fd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return Status::Internal("pipe: " + Errno(errno));
  Fd err_r(err_pipe[0]), err_w(err_pipe[1]);

  STAR_ASSIGN_OR_RETURN(const pid_t pid, Spawn(program, argv, out_w, err_w));
  out_w.Reset();
  err_w.Reset();

  CommandResult result;
  const DrainEnd end = Drain(out_r, err_r, std::chrono::steady_clock::now() + timeout, result);
  if (end.timed_out || end.open) ::kill(pid, SIGKILL);
  STAR_ASSIGN_OR_RETURN(const int status, Reap(pid, argv));
  if (end.timed_out) {
    return Status::DeadlineExceeded(FormatCommand(argv) + ": did not finish within " +
                                    std::to_string(timeout.count()) + " ms");
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

Status RunChecked(const std::vector<std::string>& argv) {
  STAR_ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv));
  if (r.exit_code == 0) return Status::Ok();
  std::string err = r.err;
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  std::string msg = "`" + FormatCommand(argv) + "` failed (exit " + std::to_string(r.exit_code) +
                    ")" + (err.empty() ? "" : ": " + err);
  if (err.find("Operation not permitted") != std::string::npos) {
    return Status::FailedPrecondition(msg);
  }
  return Status::Internal(msg);
}

std::string FormatCommand(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

bool LinkExists(const std::string& ifname) {
  return !ifname.empty() && ifname.size() < IFNAMSIZ && ::if_nametoindex(ifname.c_str()) != 0;
}

std::vector<std::string> ListLinks() {
  std::vector<std::string> out;
  struct if_nameindex* list = ::if_nameindex();
  if (list == nullptr) return out;
  for (struct if_nameindex* p = list; p->if_index != 0 && p->if_name != nullptr; ++p) {
    out.emplace_back(p->if_name);
  }
  ::if_freenameindex(list);
  return out;
}

std::string NetnsPath(const std::string& name) { return std::string(kNetnsDir) + "/" + name; }

bool NetnsExists(const std::string& name) {
  struct stat st{};
  return !name.empty() && name.find('/') == std::string::npos &&
         ::stat(NetnsPath(name).c_str(), &st) == 0;
}

std::vector<std::string> ListNetns() {
  std::vector<std::string> out;
  DIR* dir = ::opendir(kNetnsDir);
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  ::closedir(dir);
  return out;
}

}  // namespace star::local
