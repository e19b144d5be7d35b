// GlooCollective: Collective over Gloo's TCP transport. Gloo reports failures by throwing;
// every call into Gloo is wrapped by Guard(), which converts them to Status once.
#include "star/shim/gloo_collective.h"

#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <csignal>
#include <mutex>
#include <utility>

#include "gloo_ring.h"
#include "store/gloo_store.h"

namespace star::shim {
namespace {

std::string Join(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out;
}

// Shared by a communicator and its splits.
struct Shared {
  std::shared_ptr<Store> store;
  std::shared_ptr<gloo::transport::Device> device;
  GlooOptions options;
};

// Connects a context of `size` ranks under store prefix `prefix`. The k-th connection under
// one prefix uses sub-prefix k (counted in the store), so a prefix can be reused by later,
// non-concurrent connections of the same members (e.g. a split name used every epoch).
StatusOr<std::shared_ptr<gloo::Context>> Rendezvous(const Shared& shared, const std::string& prefix,
                                                    int rank, int size) {
  STAR_ASSIGN_OR_RETURN(int64_t arrivals, shared.store->Add(prefix + "/arrivals", 1));
  const std::string generation = prefix + "/" + std::to_string((arrivals - 1) / size);
  try {
    auto gloo_store = NewGlooStore(shared.store, shared.options.timeout);
    gloo::rendezvous::PrefixStore prefixed(generation, *gloo_store);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(shared.options.timeout);
    auto device = shared.device;
    context->connectFullMesh(prefixed, device);
    return std::shared_ptr<gloo::Context>(context);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const std::string msg = "gloo: connecting rank " + std::to_string(rank) + " of " +
                            std::to_string(size) + " at \"" + generation + "\": " + what;
    if (what.find("DEADLINE_EXCEEDED") != std::string::npos ||
        what.find("imed out") != std::string::npos) {
      return Status::DeadlineExceeded(msg);
    }
    return Status::Unavailable(msg);
  }
}

class GlooCollective final : public Collective {
 public:
  GlooCollective(std::shared_ptr<Shared> shared, std::shared_ptr<gloo::Context> context,
                 std::string prefix)
      : shared_(std::move(shared)), context_(std::move(context)), prefix_(std::move(prefix)) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  Status AllReduceSum(float* data, size_t count) override {
    if (count == 0) return Status::Ok();
    return Guard("AllReduceSum", -1, [&] {
      const std::optional<LinkSample> hop =
          RingAllReduceSum(*context_, data, count, timeout(), scratch_, serial_++);
      if (!hop) return;
      if (!link_) link_ = LinkSample{hop->peer, 0, 0};
      link_->seconds += hop->seconds;
      link_->bytes += hop->bytes;
    });
  }

  std::optional<LinkSample> TakeLinkSample() override { return std::exchange(link_, std::nullopt); }

  Status Broadcast(float* data, size_t count, int root) override {
    if (root < 0 || root >= size()) {
      return Status::InvalidArgument("gloo: Broadcast root " + std::to_string(root) +
                                     " out of range for size " + std::to_string(size()));
    }
    if (count == 0) return Status::Ok();
    return Guard("Broadcast", root, [&] {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(data, count);
      opts.setRoot(root);
      opts.setTimeout(timeout());
      gloo::broadcast(opts);
    });
  }

  Status Send(const float* data, size_t count, int peer, uint32_t tag) override {
    STAR_RETURN_IF_ERROR(CheckPeer("Send", peer));
    if (count == 0) return Status::Ok();
    return Guard("Send", peer, [&] {
      auto buf = context_->createUnboundBuffer(const_cast<float*>(data), count * sizeof(float));
      buf->send(peer, tag);
      buf->waitSend(timeout());
    });
  }

  Status Recv(float* data, size_t count, int peer, uint32_t tag) override {
    STAR_RETURN_IF_ERROR(CheckPeer("Recv", peer));
    if (count == 0) return Status::Ok();
    return Guard("Recv", peer, [&] {
      auto buf = context_->createUnboundBuffer(data, count * sizeof(float));
      buf->recv(peer, tag);
      buf->waitRecv(timeout());
    });
  }

  StatusOr<int> RecvFromAny(float* data, size_t count, const std::vector<int>& peers,
                            uint32_t tag) override {
    if (peers.empty()) return Status::InvalidArgument("gloo: RecvFromAny from no peers");
    for (int p : peers) STAR_RETURN_IF_ERROR(CheckPeer("RecvFromAny", p));
    if (count == 0) {
      return Status::InvalidArgument("gloo: RecvFromAny of 0 floats cannot tell the sender");
    }
    int source = -1;
    STAR_RETURN_IF_ERROR(Guard("RecvFromAny", -1, [&] {
      auto buf = context_->createUnboundBuffer(data, count * sizeof(float));
      buf->recv(peers, tag);
      buf->waitRecv(&source, timeout());
    }));
    return source;
  }

  Status Barrier() override {
    return Guard("Barrier", -1, [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTimeout(timeout());
      gloo::barrier(opts);
    });
  }

  StatusOr<std::unique_ptr<Collective>> Split(const std::vector<int>& members,
                                              const std::string& name) override {
    STAR_RETURN_IF_ERROR(broken_);
    auto self = std::find(members.begin(), members.end(), rank());
    if (self == members.end() || !std::is_sorted(members.begin(), members.end()) ||
        std::adjacent_find(members.begin(), members.end()) != members.end() ||
        members.front() < 0 || members.back() >= size()) {
      return Status::InvalidArgument("gloo: Split \"" + name + "\" on rank " +
                                     std::to_string(rank()) + ": members [" + Join(members) +
                                     "] must be ascending ranks including this one");
    }
    const std::string prefix = prefix_ + "/split/" + name + "/" + Join(members);
    const int new_rank = static_cast<int>(self - members.begin());
    STAR_ASSIGN_OR_RETURN(
        auto context, Rendezvous(*shared_, prefix, new_rank, static_cast<int>(members.size())));
    return std::unique_ptr<Collective>(new GlooCollective(shared_, std::move(context), prefix));
  }

 private:
  std::chrono::milliseconds timeout() const { return shared_->options.timeout; }

  Status CheckPeer(const char* op, int peer) const {
    if (peer < 0 || peer >= size() || peer == rank()) {
      return Status::InvalidArgument(std::string("gloo: ") + op + " on rank " +
                                     std::to_string(rank()) + ": bad peer " +
                                     std::to_string(peer) + " (size " + std::to_string(size()) +
                                     ")");
    }
    return Status::Ok();
  }

  // Runs one Gloo operation, converting its exceptions. The first failure breaks the
  // communicator (Gloo has closed its connections); later calls return Aborted.
  template <typename F>
  Status Guard(const char* op, int peer, F&& f) {
    STAR_RETURN_IF_ERROR(broken_);
    std::string what;
    bool io = false;
    try {
      f();
      return Status::Ok();
    } catch (const gloo::IoException& e) {
      what = e.what();
      io = true;
    } catch (const std::exception& e) {
      what = e.what();
    }
    std::string msg = std::string("gloo: ") + op + " on rank " + std::to_string(rank()) + " of " +
                      std::to_string(size());
    if (peer >= 0) msg += " with rank " + std::to_string(peer);
    msg += ": " + what;
    Status status = !io ? Status::Internal(msg)
                    : what.find("imed out") != std::string::npos ? Status::DeadlineExceeded(msg)
                                                                  : Status::Unavailable(msg);
    broken_ = Status::Aborted("gloo: communicator broken by an earlier failure: " +
                              status.ToString());
    return status;
  }

  std::shared_ptr<Shared> shared_;
  std::shared_ptr<gloo::Context> context_;
  const std::string prefix_;
  Status broken_;
  std::vector<float> scratch_;        // the ring's receive buffer
  uint32_t serial_ = 0;               // all-reduces so far (their slots)
  std::optional<LinkSample> link_;    // since the last TakeLinkSample
};

}  // namespace

StatusOr<std::unique_ptr<Collective>> ConnectGloo(std::shared_ptr<Store> store, int rank, int size,
                                                  const GlooOptions& options) {
  // Gloo writes to peer sockets without MSG_NOSIGNAL: a peer that died would kill this
  // process with SIGPIPE instead of failing the operation. Ignore it, once, process-wide.
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });
  if (size < 1 || rank < 0 || rank >= size) {
    return Status::InvalidArgument("gloo: rank " + std::to_string(rank) + " out of range for size " +
                                   std::to_string(size));
  }
  auto shared = std::make_shared<Shared>();
  shared->store = std::move(store);
  shared->options = options;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    shared->device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return Status::Unavailable("gloo: cannot listen on \"" + options.hostname + "\": " + e.what());
  }
  STAR_ASSIGN_OR_RETURN(auto context, Rendezvous(*shared, options.prefix, rank, size));
  return std::unique_ptr<Collective>(
      new GlooCollective(std::move(shared), std::move(context), options.prefix));
}

}  // namespace star::shim
