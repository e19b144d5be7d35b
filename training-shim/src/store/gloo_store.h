// Internal: lets Gloo rendezvous through a star::shim::Store.
#pragma once

#include <chrono>
#include <gloo/rendezvous/store.h>
#include <memory>

#include "star/shim/store.h"

namespace star::shim {

// A gloo::rendezvous::Store over `store`. Gloo's interface reports errors by throwing: the
// adapter throws gloo::IoException carrying the Status text (callers in the collective
// backend convert it back). get() and wait() without a timeout use `timeout`.
std::unique_ptr<gloo::rendezvous::Store> NewGlooStore(std::shared_ptr<Store> store,
                                                      std::chrono::milliseconds timeout);

}  // namespace star::shim
