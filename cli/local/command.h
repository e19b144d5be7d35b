// The `star local` and `star busy` verbs (what cli/main.cc dispatches to).
#pragma once

#include <string>
#include <vector>

namespace star::local {

struct LocalArgs {
  std::string manifest;              // JOB.yaml
  std::string policy;                // "" = the manifest's own settings
  std::vector<std::string> injects;  // --inject SPEC...
  std::string report;                // --report FILE.json ("" = none)
  std::string plot;                  // --plot FILE.png ("" = none)
  std::string timeout = "30m";       // --timeout DURATION
  bool no_network = false;           // --no-network: all workers on loopback
  std::string log_dir;               // --log-dir DIR ("" = temporary, removed on success)
  bool quiet = false;                // --quiet: no progress line
  std::string selector_model;        // --selector-model FILE (main sets the installed default)
};

// Runs the job; prints the report (without its per-report samples) as one JSON object
// on stdout and progress on stderr. Exit status: 0 done (target reached or iteration
// budget spent), 1 bad input or failure, 130 interrupted (SIGINT/SIGTERM/SIGHUP).
// Input errors are reported before anything is created.
int RunLocalCommand(const LocalArgs& args);

// `star busy --threads N --seconds S`: N threads spinning for at most S seconds (the
// co-located neighbor that `--inject worker=W,neighbor=N` starts).
int RunBusy(int threads, double seconds);

}  // namespace star::local
