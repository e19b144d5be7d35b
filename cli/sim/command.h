// The `star sim` verb (what cli/main.cc dispatches to): simulates SCENARIO.json under one
// policy or all of them and prints
//   {"results":[{"policy":P,"tta_seconds":X|null,"updates":U,"iterations":I,"decisions":D},...]}
// on stdout (simulator.h). Bad input (flags, the scenario, its fields) is reported on
// stderr naming the flag or field, with exit status 1 and nothing on stdout. The files of
// --trace and --timeline appear only when every policy ran; a run that fails leaves them
// as they were.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace star::sim {

struct SimArgs {
  std::string scenario;                // SCENARIO.json ("-" = stdin)
  std::string policy = "auto";         // --policy: auto|ssgd|asgd|fixed-k|groups|amp|boa|all
  std::string selector = "heuristic";  // --selector: heuristic|ml
  // --model FILE (with --selector ml); "" = the installed model (DefaultSelectorModelPath).
  // With --selector ml the model must load (else exit 1 naming the file).
  std::string model;
  std::optional<int64_t> seed;         // --seed N: replaces the scenario's seed, >= 0
  std::string trace;                   // --trace FILE.csv; "" = none
  // --timeline FILE.json; "" = none. Writes {"timelines":[{"policy":P,"timeline":[{"t",
  // "event","worker","detail"},...]},...]}: each policy's control-loop timeline in the
  // form of `star local`'s report timeline[].
  std::string timeline;
};

// Runs the verb; writes the result to `out` and errors to `err`. Returns the exit status:
// 0 done (whether or not a policy reached the target), 1 bad input or a failure.
int RunSimCommand(const SimArgs& args, std::ostream& out, std::ostream& err);

}  // namespace star::sim
