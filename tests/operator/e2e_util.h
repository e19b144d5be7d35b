// What the star-operator end-to-end tests share: star-operator as a child process, bounded
// waits on conditions and TrainingJob manifests (the fixture is in cluster_util.h).
#pragma once

#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace star::op::e2e {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// star-operator as a child process that can be SIGKILLed (kill -9) or stopped cleanly.
// Reaped by the destructor; dies with the test (PR_SET_PDEATHSIG).
class OperatorProcess {
 public:
  OperatorProcess() = default;
  ~OperatorProcess() { Kill(); }
  OperatorProcess(const OperatorProcess&) = delete;
  OperatorProcess& operator=(const OperatorProcess&) = delete;

  bool Start(const std::vector<std::string>& argv, const std::string& log) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      dup2(fds[1], 1);
      const int err = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err >= 0) dup2(err, 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
    return pid_ > 0;
  }

  // The rest of the first stdout line starting with `prefix`, within `timeout`. Lines
  // before it are consumed. A zero timeout still reads what the process has written so far.
  std::optional<std::string> WaitForLine(const std::string& prefix, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (bool last = false;;) {
      for (auto nl = buf_.find('\n'); nl != std::string::npos; nl = buf_.find('\n')) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
      }
      if (out_ < 0 || last) return std::nullopt;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      last = left.count() <= 0;  // past the deadline: one read of what is already there
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0))) <= 0) return std::nullopt;
      char chunk[4096];
      const ssize_t n = read(out_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  // The wait status once the process has exited by itself within `timeout` (reaped), else
  // nullopt (it keeps running).
  std::optional<int> WaitExit(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return std::nullopt;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    for (;;) {
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        Close();
        return status;
      }
      if (r < 0 || std::chrono::steady_clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // SIGTERM, then SIGKILL after `grace`; returns the wait status.
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(10)) {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Close();
    return status;
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    Close();
  }

 private:
  void Close() {
    pid_ = -1;
    if (out_ >= 0) close(out_);
    out_ = -1;
    buf_.clear();
  }
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buf_;
};

// Polls `ok` until it holds or `timeout` passes (a bounded wait on a condition).
inline bool Eventually(const std::function<bool()>& ok,
                       std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return ok();
}

// A port the kernel just had free on 127.0.0.1.
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// What the pods of a test job run. A test that plays kubelet for its pods gives them an
// image the test node does not run, and a scheduler name of its own (it binds them to its
// nodes itself).
struct PodTemplate {
  std::string image = "ghcr.io/star-dev/fmnist:0.1";
  std::string scheduler_name;  // "" = the default scheduler
  std::string egress_bandwidth;  // the pods' kubernetes.io/egress-bandwidth ("" = none)
};

// A TrainingJob in namespace `ns` of `workers` pods with CPU request and limit as given, a
// target accuracy of 0.85 and detection over a window of 5; `extra` is appended to its spec.
inline std::string TrainingJobYaml(const std::string& name, const std::string& ns, int workers, const PodTemplate& pods,
                                   const std::string& request, const std::string& limit, const std::string& extra) {
  return "apiVersion: star.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
         "\nspec:\n  workers:\n    replicas: " + std::to_string(workers) + "\n    template:\n" +
         (pods.egress_bandwidth.empty()
              ? std::string()
              : "      metadata:\n        annotations:\n          kubernetes.io/egress-bandwidth: \"" +
                    pods.egress_bandwidth + "\"\n") +
         "      spec:\n" +
         (pods.scheduler_name.empty() ? std::string() : "        schedulerName: " + pods.scheduler_name + "\n") +
         "        containers:\n          - name: trainer\n            image: " + pods.image +
         "\n            resources:\n              requests: {cpu: " + request + "}\n              limits: {cpu: " + limit +
         "}\n  training:\n    globalBatchSize: 256\n    targetAccuracy: 0.85\n" + extra;
}

// A TrainingJob in namespace `ns` (default: default) with `workers` workers of 500m CPU each.
inline std::string JobYaml(const std::string& name, int workers, const std::string& ns = "default",
                           const PodTemplate& pods = {}) {
  return TrainingJobYaml(name, ns, workers, pods, "500m", "500m", "  mitigation:\n    detection:\n      window: 5\n");
}

// A TrainingJob in namespace `ns` of `workers` pods with CPU request and limit as given
// (and spec.training.maxIterations when `max_iterations` > 0), without AMP: the job of the
// resource-reallocation scenarios.
inline std::string ReallocJob(const std::string& name, int workers, const std::string& request, const std::string& limit,
                              int max_iterations = 0, const std::string& ns = "default", const PodTemplate& pods = {}) {
  return TrainingJobYaml(
      name, ns, workers, pods, request, limit,
      (max_iterations > 0 ? "    maxIterations: " + std::to_string(max_iterations) + "\n" : std::string()) +
          "  mitigation:\n    detection:\n      window: 5\n    amp:\n      enabled: false\n");
}

}  // namespace star::op::e2e
