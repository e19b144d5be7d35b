// LocalCollective: a group of ranks run as threads in one process, exchanging data through
// a shared in-memory mailbox. Implements the whole Collective interface (including Split
// and RecvFromAny) so code written against Collective can be tested at many world sizes
// cheaply, the way gloo/test/base_test.h runs ranks as threads.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "star/shim/collective.h"

namespace star::shim {

// Returns `size` communicators (element i has rank i) sharing one mailbox. Hand each to
// its own thread: like every Collective, each is used by one thread at a time, and a
// collective completes only when every rank has called it. Every operation (and Split)
// fails with DeadlineExceeded after `timeout` if its peers do not show up. Destroying a
// communicator makes its peers' pending and later operations that need it fail with
// Unavailable naming the rank. The communicators may be destroyed in any order.
// size must be >= 1.
std::vector<std::unique_ptr<Collective>> NewLocalGroup(int size,
                                                       std::chrono::milliseconds timeout);

}  // namespace star::shim
