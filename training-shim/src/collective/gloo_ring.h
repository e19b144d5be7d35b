// The ring all-reduce GlooCollective runs (reduce-scatter, then all-gather, each n - 1
// hops to the ring successor), timed per hop. Gloo's own allreduce hides its hops; this
// one measures them, so that a slow link shows at the rank behind it.
//
// Gloo's TCP pairs start moving a message only once its receiver has posted the receive,
// and every hop here posts its receive before its send: a hop's receive time is its
// message's transfer over the link from the predecessor, plus however long the
// predecessor took to be ready. The fastest hop of an all-reduce is therefore the
// link's own time (the hop after the arrival barrier, when every rank sends at once,
// bounds it), whichever link the ring as a whole waits on.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "star/shim/collective.h"

namespace star::shim {

// In place: data becomes the sum over the context's ranks. `scratch` is reused between
// calls; `serial` numbers the call (every rank passes the same: its messages' slots are
// apart from other calls' and from Send/Recv tags, which are 32-bit). Returns the link from this rank's predecessor (peer = its rank in `context`):
// the fastest hop's receive seconds and bytes (nullopt with one rank, or when every
// chunk is empty). Throws what Gloo throws (the caller converts it).
std::optional<LinkSample> RingAllReduceSum(gloo::Context& context, float* data, size_t count,
                                           std::chrono::milliseconds timeout,
                                           std::vector<float>& scratch, uint32_t serial);

}  // namespace star::shim
