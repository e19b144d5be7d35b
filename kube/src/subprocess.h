// Runs a command to completion and captures what it prints: for exec credential plugins.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::kube {

struct ProcessOutput {
  int exit_code = -1;      // -1 when killed by a signal
  bool timed_out = false;  // killed after the timeout
  std::string out;         // stdout, at most max_output bytes
  std::string err;         // stderr, at most max_output bytes
};

// argv[0] is looked up in PATH unless it holds a '/'; `env` is the whole environment
// ("NAME=value"). stdin is /dev/null. The child is killed (SIGKILL) once `timeout` passes
// and always reaped. NotFound when argv[0] cannot be run, Internal when the pipes or the
// spawn fail otherwise.
StatusOr<ProcessOutput> RunProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                   std::chrono::milliseconds timeout, size_t max_output = 1 << 20);

}  // namespace star::kube
