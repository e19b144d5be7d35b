#include "gloo_ring.h"

#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <memory>

namespace star::shim {
namespace {

using Clock = std::chrono::steady_clock;

// Above Gloo's own slot prefixes (0x01-0x08 in the top byte) and 32-bit user tags; the
// low 20 bits number the hops (2 (n - 1) < 2^20).
constexpr uint64_t kSlotPrefix = uint64_t{0x10} << 56;

// Chunk c of n over `count` floats: [begin, end); the first count % n chunks are one longer.
struct Chunks {
  size_t count, n;
  size_t Begin(size_t c) const { return c * (count / n) + std::min(c, count % n); }
  size_t Size(size_t c) const { return count / n + (c < count % n ? 1 : 0); }
};

// The fastest non-empty hop seen so far.
struct FastestHop {
  std::optional<LinkSample> link;
  void Add(int peer, double seconds, size_t floats) {
    if (floats == 0 || (link && link->seconds <= seconds)) return;
    link = LinkSample{peer, seconds, static_cast<int64_t>(floats * sizeof(float))};
  }
};

class Ring {
 public:
  Ring(gloo::Context& context, float* data, size_t count, std::chrono::milliseconds timeout,
       std::vector<float>& scratch, uint32_t serial)
      : n_(static_cast<size_t>(context.size)),
        rank_(static_cast<size_t>(context.rank)),
        next_(static_cast<int>((rank_ + 1) % n_)),
        prev_(static_cast<int>((rank_ + n_ - 1) % n_)),
        chunks_{count, n_},
        timeout_(timeout),
        slot_(kSlotPrefix | (uint64_t{serial} << 20)),
        data_(data),
        scratch_(scratch) {
    scratch_.resize(chunks_.Size(0));
    data_buf_ = context.createUnboundBuffer(data, count * sizeof(float));
    scratch_buf_ = context.createUnboundBuffer(scratch_.data(), scratch_.size() * sizeof(float));
  }

  std::optional<LinkSample> Run() {
    // Reduce-scatter: after hop s, chunk (rank - s - 1) holds s + 2 ranks' sum; after
    // n - 1 hops this rank's chunk (rank + 1) is complete.
    for (size_t s = 0; s + 1 < n_; ++s) {
      const size_t out = (rank_ + n_ - s) % n_, in = (rank_ + n_ - s - 1) % n_;
      Hop(s, out, in, /*reduce=*/true);
    }
    // All-gather: pass the complete chunks around.
    for (size_t s = 0; s + 1 < n_; ++s) {
      const size_t out = (rank_ + 1 + n_ - s) % n_, in = (rank_ + n_ - s) % n_;
      Hop(n_ + s, out, in, /*reduce=*/false);
    }
    return fastest_.link;
  }

 private:
  // Sends chunk `out` to the successor and receives chunk `in` from the predecessor,
  // into scratch (then added) when reducing, else in place.
  void Hop(size_t step, size_t out, size_t in, bool reduce) {
    const uint64_t slot = slot_ + step;
    const size_t in_size = chunks_.Size(in), out_size = chunks_.Size(out);
    const Clock::time_point t0 = Clock::now();
    if (in_size > 0) {
      if (reduce) {
        scratch_buf_->recv(prev_, slot, 0, in_size * sizeof(float));
      } else {
        data_buf_->recv(prev_, slot, chunks_.Begin(in) * sizeof(float), in_size * sizeof(float));
      }
    }
    if (out_size > 0) {
      data_buf_->send(next_, slot, chunks_.Begin(out) * sizeof(float), out_size * sizeof(float));
    }
    if (in_size > 0) {
      (reduce ? scratch_buf_ : data_buf_)->waitRecv(timeout_);
      fastest_.Add(prev_, std::chrono::duration<double>(Clock::now() - t0).count(), in_size);
      if (reduce) {
        float* dst = data_ + chunks_.Begin(in);
        for (size_t i = 0; i < in_size; ++i) dst[i] += scratch_[i];
      }
    }
    if (out_size > 0) data_buf_->waitSend(timeout_);
  }

  const size_t n_, rank_;
  const int next_, prev_;
  const Chunks chunks_;
  const std::chrono::milliseconds timeout_;
  const uint64_t slot_;
  float* const data_;
  std::vector<float>& scratch_;
  std::unique_ptr<gloo::transport::UnboundBuffer> data_buf_, scratch_buf_;
  FastestHop fastest_;
};

}  // namespace

std::optional<LinkSample> RingAllReduceSum(gloo::Context& context, float* data, size_t count,
                                           std::chrono::milliseconds timeout,
                                           std::vector<float>& scratch, uint32_t serial) {
  if (context.size < 2 || count == 0) return std::nullopt;
  return Ring(context, data, count, timeout, scratch, serial).Run();
}

}  // namespace star::shim
