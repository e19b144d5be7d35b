// star-fmnist's parameter-server role (ranks below --servers).
#pragma once

#include "flags.h"

namespace star::fmnist {

// Serves this rank's shard of the model's parameters until every worker finished, then
// prints {"role":"server","updates":U,"gradients_applied":G,"late_gradients":L}.
// Returns 0, or 1 after a line on stderr.
int RunServer(const Flags& flags);

}  // namespace star::fmnist
