// Supervisor: the processes of one `star local` run (servers, workers, the evaluator,
// injected neighbors), started in the sandbox with their output in a log file each,
// watched for their end, and stopped. Not thread-safe: the runtime's main thread owns it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "local/sandbox.h"
#include "star/core/status.h"

namespace star::local {

enum class Role { kServer, kWorker, kEvaluator, kNeighbor };

struct Proc {
  std::string name;  // "worker 2", "server 0", "evaluator", "neighbor of worker 1"
  Role role = Role::kWorker;
  int index = 0;  // worker / server index
  pid_t pid = -1;
  std::string log;
  bool running = false;
  int wait_status = 0;
};

class Supervisor {
 public:
  explicit Supervisor(Sandbox& sandbox) : sandbox_(sandbox) {}

  // Starts `proc` by `spec` with stderr (and stdout unless spec.stdout_fd is set) into
  // proc.log (truncated). Returns its index. Errors: Unavailable when the log cannot be
  // opened; Sandbox::Spawn's, prefixed with proc.name.
  [[nodiscard]] StatusOr<int> Spawn(Proc proc, Sandbox::SpawnSpec spec);
  // Reaps the processes that ended and counts the workers that exited cleanly into
  // *workers_done. Internal naming the first server, worker or evaluator that failed
  // (exit status or signal) with the end of its log; neighbors may end any way.
  [[nodiscard]] Status Reap(int* workers_done);
  // Whether a process of `role` is still running.
  bool Running(Role role) const;
  // SIGKILLs process `index`'s group and reaps it (no-op when it is not running).
  void Kill(int index);
  // SIGTERM to workers, servers and the evaluator (SIGKILL to neighbors), then SIGKILL to
  // whatever is left after 5 s; every process is reaped.
  void StopAll();

  const std::vector<Proc>& procs() const { return procs_; }

 private:
  Sandbox& sandbox_;
  std::vector<Proc> procs_;
};

// The last `lines` lines of file `path`, each on a new line indented by 4 (for failure
// messages); "" when it cannot be read.
std::string Tail(const std::string& path, int lines);

}  // namespace star::local
