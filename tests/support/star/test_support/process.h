// Child processes for end-to-end tests: run a command to completion with a bounded wait,
// or keep one running in the background. Every process started here is reaped: on
// completion, on timeout (SIGKILL), or by the destructor; and it dies with the test
// through PR_SET_PDEATHSIG.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace star::test_support {

struct ProcessResult {
  int exit_code = -1;  // -1: killed (timeout) or did not start
  bool timed_out = false;
  std::string out, err;
};

// Runs argv[0] (looked up in PATH) with `stdin_text` on its standard input; waits at most
// `timeout`, then kills it.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& stdin_text,
                         std::chrono::milliseconds timeout);

// A process left running: its stdout is read line by line, its stderr goes to a file.
class BackgroundProcess {
 public:
  BackgroundProcess() = default;
  ~BackgroundProcess();  // Stop()
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  // False if it could not be started.
  bool Start(const std::vector<std::string>& argv, const std::string& stderr_path);
  // The next stdout line that starts with `prefix`, read within `timeout`; nullopt if the
  // deadline passes or the process closes its stdout first.
  std::optional<std::string> WaitForLine(const std::string& prefix, std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL if it has not exited within `grace`; reaps. Returns the wait
  // status (-1 if there was no process).
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string pending_;
};

}  // namespace star::test_support
