// star-fmnist's evaluator role (--evaluate DIR): keeps evaluation off the workers'
// iterations, so `star local` measures time to accuracy the same way for every sync mode.
#pragma once

#include "flags.h"

namespace star::fmnist {

// Evaluates every snapshot (snapshot.h) in flags.evaluate_dir in iteration order,
// printing one JSON line each, {"iteration":I,"time_seconds":T,"accuracy":A}, and
// deleting it. Returns 0 once the file "done" exists there and no snapshot is left; 1
// (after a line on stderr) when no snapshot arrives for --timeout-ms or on an error.
int RunEvaluator(const Flags& flags);

}  // namespace star::fmnist
