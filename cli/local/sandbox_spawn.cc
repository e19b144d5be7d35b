// Sandbox::Spawn: starting one process inside the sandbox's cgroups and namespace.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>

#include "local/host.h"
#include "local/sandbox.h"

namespace star::local {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kExecWait = std::chrono::seconds(30);

std::string Errno(int e) { return std::strerror(e); }


std::mutex& SpawnMutex() {
  static std::mutex mu;
  return mu;
}

// Moves `fd` to a number >= 3 (so that dup2 onto 0-2 in the child cannot clobber it),
// close-on-exec. Returns the new descriptor (the old one is closed), or -1.
int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

enum ChildStep : int { kStepGo = 1, kStepSetns, kStepStdout, kStepStderr, kStepSetpgid, kStepExec };

const char* StepName(int step) {
  switch (step) {
    case kStepGo: return "wait for the cgroup attach";
    case kStepSetns: return "setns";
    case kStepStdout: return "dup2 stdout";
    case kStepStderr: return "dup2 stderr";
    case kStepSetpgid: return "setpgid";
    case kStepExec: return "exec";
    default: return "child setup";
  }
}

struct ChildArgs {
  int go_fd;     // read end: one byte once the parent has attached the cgroup
  int report_fd; // write end, close-on-exec: {step, errno} on failure
  int ns_fd;     // namespace to enter, or -1
  int out_fd;
  int err_fd;
  char* const* argv;
  char* const* envp;
};

[[noreturn]] void ChildFail(int report_fd, int step) {
  const int msg[2] = {step, errno};
  const ssize_t w = ::write(report_fd, msg, sizeof(msg));
  (void)w;
  ::_exit(127);
}

// Runs in the forked child: async-signal-safe calls only.
[[noreturn]] void ChildMain(const ChildArgs& a) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // KILL/STOP: EINVAL
  char byte = 0;
  ssize_t r;
  do r = ::read(a.go_fd, &byte, 1);
  while (r < 0 && errno == EINTR);
  if (r != 1) ::_exit(127);  // the parent gave up (attach failed): it kills and reaps us
  if (a.ns_fd >= 0 && ::setns(a.ns_fd, CLONE_NEWNET) != 0) ChildFail(a.report_fd, kStepSetns);
  int out = a.out_fd, err = a.err_fd;
  if (err == 1 && out >= 0 && out != 1) {  // keep stderr's target alive across dup2(out, 1)
    err = ::fcntl(err, F_DUPFD_CLOEXEC, 3);
    if (err < 0) ChildFail(a.report_fd, kStepStderr);
  }
  if (out >= 0) {
    if (out != 1 && ::dup2(out, 1) < 0) ChildFail(a.report_fd, kStepStdout);
    if (out == 1 && ::fcntl(1, F_SETFD, 0) != 0) ChildFail(a.report_fd, kStepStdout);
  }
  if (err >= 0) {
    if (err != 2 && ::dup2(err, 2) < 0) ChildFail(a.report_fd, kStepStderr);
    if (err == 2 && ::fcntl(2, F_SETFD, 0) != 0) ChildFail(a.report_fd, kStepStderr);
  }
  if (::setpgid(0, 0) != 0) ChildFail(a.report_fd, kStepSetpgid);
  // Everything but 0-2 and the report pipe (close-on-exec) goes now.
  const unsigned rep = static_cast<unsigned>(a.report_fd);
  if (rep > 3) ::close_range(3, rep - 1, 0);
  ::close_range(rep + 1, ~0U, 0);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execvpe(a.argv[0], a.argv, a.envp);
  ChildFail(a.report_fd, kStepExec);
}

// The descriptors of one spawn, closed when it goes out of scope.
struct SpawnFds {
  int ns = -1;
  int go[2] = {-1, -1};
  int report[2] = {-1, -1};
  ~SpawnFds() { CloseAll(); }
  void Close(int* fd) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  void CloseAll() {
    for (int* fd : {&ns, &go[0], &go[1], &report[0], &report[1]}) Close(fd);
  }
};

Status OpenPipes(SpawnFds& fds) {
  if (::pipe2(fds.go, O_CLOEXEC) != 0 || ::pipe2(fds.report, O_CLOEXEC) != 0) {
    return Status::Internal("Spawn: pipe: " + Errno(errno));
  }
  for (int* fd : {&fds.go[0], &fds.go[1], &fds.report[0], &fds.report[1]}) *fd = AboveStdio(*fd);
  if (fds.go[0] < 0 || fds.go[1] < 0 || fds.report[0] < 0 || fds.report[1] < 0) {
    return Status::Internal("Spawn: fcntl: " + Errno(errno));
  }
  return Status::Ok();
}

void KillAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

// Reads the child's {step, errno} report until EOF (exec succeeded: close-on-exec), for
// at most kExecWait. Returns the bytes read into msg; DeadlineExceeded or Internal when
// the wait itself failed.
StatusOr<size_t> AwaitExec(int report_fd, int (&msg)[2], const std::string& program) {
  size_t got = 0;
  const auto deadline = Clock::now() + kExecWait;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      return Status::DeadlineExceeded("Spawn: " + program + ": did not exec within " +
                                      std::to_string(kExecWait.count()) + " s");
    }
    pollfd p{report_fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) continue;
    if (n < 0) return Status::Internal("Spawn: poll: " + Errno(errno));
    const ssize_t r = ::read(report_fd, reinterpret_cast<char*>(msg) + got, sizeof(msg) - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return got;
    got += static_cast<size_t>(r);
    if (got == sizeof(msg)) return got;
  }
}

// What a child that reported `got` bytes of {step, errno} failed at (it is reaped here).
Status ChildFailure(pid_t pid, const int (&msg)[2], size_t got, const std::string& program) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != sizeof(msg)) return Status::Internal("Spawn: " + program + ": the child failed before exec");
  const std::string what = std::string(StepName(msg[0])) + " " + program + ": " + Errno(msg[1]);
  if (msg[0] == kStepExec && msg[1] == ENOENT) return Status::NotFound(what);
  return Status::Internal(what);
}

// fork with every signal blocked (no handler of ours may run in the child); the child
// runs ChildMain. Returns the pid, or the fork error.
StatusOr<pid_t> Fork(const ChildArgs& args) {
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = ::fork();
  if (pid == 0) ChildMain(args);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return Status::Internal("Spawn: fork: " + Errno(fork_errno));
  return pid;
}

}  // namespace

Status Sandbox::CheckSpawn(const SpawnSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return Status::InvalidArgument("Spawn: argv: must name a program");
  }
  const std::string job = job_cgroup();
  if (!spec.cgroup.empty() && spec.cgroup != job && spec.cgroup.rfind(job + "/", 0) != 0) {
    return Status::InvalidArgument("Spawn: cgroup: must be " + job + " or below it, got \"" +
                                   spec.cgroup + "\"");
  }
  if (spec.cgroup.find("..") != std::string::npos) {
    return Status::InvalidArgument("Spawn: cgroup: \"..\" is not allowed, got \"" + spec.cgroup +
                                   "\"");
  }
  if (spec.netns_slot < -1 || spec.netns_slot >= slots_) {
    return Status::InvalidArgument("Spawn: netns_slot: must be -1 or in [0, " +
                                   std::to_string(slots_) + "), got " +
                                   std::to_string(spec.netns_slot));
  }
  if (spec.netns_slot >= 0 && !network_) {
    return Status::FailedPrecondition("Spawn: netns_slot " + std::to_string(spec.netns_slot) +
                                      ": the sandbox has no network namespaces");
  }
  {
    std::lock_guard lock(mu_);
    if (torn_down_) return Status::FailedPrecondition("Spawn: the sandbox was torn down");
  }
  if (!spec.cgroup.empty() && !host_->CgroupExists(spec.cgroup)) {
    return Status::InvalidArgument("Spawn: cgroup: " + spec.cgroup + " does not exist");
  }
  return Status::Ok();
}

StatusOr<pid_t> Sandbox::Spawn(const SpawnSpec& spec) {
  STAR_RETURN_IF_ERROR(CheckSpawn(spec));
  // Everything the child needs is prepared here: it may only make async-signal-safe calls.
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // One spawn at a time: a concurrent fork would inherit our pipes and delay the EOF
  // that says "exec succeeded".
  std::lock_guard spawn_lock(SpawnMutex());
  SpawnFds fds;
  if (spec.netns_slot >= 0) {
    const std::string path = host_->NamespacePath(netns(spec.netns_slot));
    fds.ns = AboveStdio(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fds.ns < 0) return Status::Internal("Spawn: open " + path + ": " + Errno(errno));
  }
  STAR_RETURN_IF_ERROR(OpenPipes(fds));
  STAR_ASSIGN_OR_RETURN(const pid_t pid, Fork({fds.go[0], fds.report[1], fds.ns, spec.stdout_fd,
                                               spec.stderr_fd, argv.data(), envp.data()}));
  for (int* fd : {&fds.ns, &fds.go[0], &fds.report[1]}) fds.Close(fd);
  (void)::setpgid(pid, pid);  // also done by the child; here too so no signal races it
  if (!spec.cgroup.empty()) {
    if (Status st = host_->MoveProcess(spec.cgroup, pid); !st.ok()) {
      fds.CloseAll();
      KillAndReap(pid);
      return st.WithPrefix("Spawn: attach to cgroup");
    }
  }
  const char go_byte = 'g';
  ssize_t w;
  do w = ::write(fds.go[1], &go_byte, 1);
  while (w < 0 && errno == EINTR);
  fds.Close(&fds.go[1]);

  int msg[2] = {0, 0};
  StatusOr<size_t> got = AwaitExec(fds.report[0], msg, spec.argv[0]);
  fds.CloseAll();
  if (!got.ok()) {
    KillAndReap(pid);
    return got.status();
  }
  if (*got == 0) return pid;  // exec'd
  return ChildFailure(pid, msg, *got, spec.argv[0]);
}

}  // namespace star::local
