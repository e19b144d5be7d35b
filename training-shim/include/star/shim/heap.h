// How a trainer's process keeps the memory it frees.
#pragma once

#include "star/core/status.h"

namespace star::shim {

// Keeps freed memory in the process's heap instead of handing it back to the kernel
// (glibc's mallopt: blocks up to 32 MiB come from the heap, and the heap's top is kept up
// to 1 GiB). A trainer frees and allocates its activations every iteration. By default
// glibc maps blocks of a size it has not seen before afresh and unmaps them on free, and
// trims the heap's top: after a batch change each iteration can fault its activations in
// again. Where page faults are slow (a virtual machine filling 400 MB took 1.5 s),
// the testbed's LibTorch CNN then ran 3-9x slower per sample at some batch sizes until
// the next change, and the control loop rightly flagged an uninjected worker. Call once,
// before training. An error (a malloc that is not glibc's, as under AddressSanitizer)
// leaves the defaults and is safe to report and ignore.
Status RetainFreedHeap();

}  // namespace star::shim
