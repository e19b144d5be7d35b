// A harness for tests that run workers as separate OS processes: the test binary
// re-executes itself (fork + exec, so the parent's threads, e.g. cpprest's, are not
// inherited half-alive) with a --gtest_filter selecting a worker entry test and the
// worker's settings in environment variables.
//
// Parent side: TempDir (a directory removed with everything in it), ProcessGroup (spawns,
// signals, reaps; every process it started is SIGKILLed and reaped by its destructor, and
// dies with the parent thread that forked it through PR_SET_PDEATHSIG).
// Worker side: Env(), SignalParent().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "star/core/status.h"
#include "star/test_support/temp_dir.h"

namespace star::shim::harness {

using TempDir = star::test_support::TempDir;

// The whole content of a file ("" if it cannot be read).
std::string ReadFile(const std::string& path);
// "exited with code 3", "killed by signal 9", "not reaped" (for -1).
std::string DescribeWaitStatus(int wait_status);

class ProcessGroup {
 public:
  // Creates the signal pipe that SignalParent() writes to. Not thread-safe: use from the
  // test's main thread.
  ProcessGroup();
  // SIGKILLs and reaps every process not reaped yet.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // Starts this executable with `--gtest_filter=<gtest_filter>`, the parent's environment
  // plus `env` ("NAME=value"; they override inherited ones), stdout and stderr redirected
  // to `log_path`. Returns the process's index (0, 1, ... in spawn order).
  StatusOr<size_t> Spawn(const std::string& gtest_filter, const std::vector<std::string>& env,
                         const std::string& log_path);

  // Starts `program` with `args` the same way (environment, log, death with the parent).
  StatusOr<size_t> SpawnProgram(const std::string& program, const std::vector<std::string>& args,
                                const std::vector<std::string>& env, const std::string& log_path);

  // Waits until `count` signal bytes (from SignalParent in any worker) have arrived, up to
  // `timeout`. DeadlineExceeded if not; Unavailable if every worker closed the pipe (all
  // exited) first. Call after the last Spawn: it closes the parent's write end.
  Status WaitForSignals(int count, std::chrono::milliseconds timeout);

  // Sends SIGKILL to process `index` (not yet reaped).
  Status Kill(size_t index);

  // Waits for every process to end, up to `limit`; returns their wait statuses by index,
  // -1 for a process still running at the deadline (the destructor kills it).
  std::vector<int> ReapAll(std::chrono::milliseconds limit);

  size_t size() const { return pids_.size(); }

 private:
  std::vector<pid_t> pids_;  // 0 once reaped
  int signal_read_ = -1;
  int signal_write_ = -1;
};

// ---- worker side ----

// The environment variable's value, "" if unset.
std::string Env(const char* name);
// Writes one byte to the parent's signal pipe (see ProcessGroup::WaitForSignals).
// Unavailable if this process was not started by a ProcessGroup.
Status SignalParent();

}  // namespace star::shim::harness
