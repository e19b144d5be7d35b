// One direction of a pipeline link, on its own thread, so that a stage's compute never
// waits on a transfer it does not need: an Outbox sends queued messages in order; an
// Inbox receives a budget of messages ahead of need, in tag order. Each owns a
// communicator of two ranks (this stage and its neighbour) that only its thread uses.
// Every transfer is bounded by that communicator's timeout, so neither thread outlives
// its destructor by more than one timeout.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "star/core/status.h"
#include "star/shim/collective.h"

namespace star::shim {

// What one direction moved since the last Take.
struct ChannelCounters {
  int messages = 0;
  int64_t bytes = 0;
  double seconds = 0;  // Outbox: sending (Send to the transport holding the data);
                       // Inbox: the compute thread waiting in Take
  double latency_seconds = 0;  // Outbox: the added delay its messages were held for
};

// What both directions share: the pair communicator, the lock and wake-up, the
// counters and the thread (started by the derived class once it is whole, stopped by
// its destructor before its own members go).
class Channel {
 public:
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ChannelCounters TakeCounters();

 protected:
  Channel(std::unique_ptr<Collective> pair, int peer) : pair_(std::move(pair)), peer_(peer) {}
  ~Channel() = default;
  void Stop();

  std::unique_ptr<Collective> pair_;
  const int peer_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  Status error_;
  ChannelCounters counters_;
  std::thread thread_;
};

class Outbox : public Channel {
 public:
  // `peer`: the neighbour's rank in `pair`. `delay_seconds` > 0 holds each message that
  // long after its Post before sending it (later messages wait behind it, so the link
  // gains latency, not a lower rate), counted as the message's latency: a link with
  // added delay where the kernel cannot add one (no netem).
  Outbox(std::unique_ptr<Collective> pair, int peer, double delay_seconds = 0);
  ~Outbox();  // sends what is queued, then stops

  // Queues `data` under `tag`; returns the first failure of an earlier send.
  Status Post(std::vector<float> data, uint64_t tag);
  // Waits until every queued message is handed to the transport; the first failure.
  Status Flush();

 private:
  struct Message {
    std::vector<float> data;
    uint64_t tag;
    std::chrono::steady_clock::time_point due;  // Post + the delay
  };
  void Run();

  const double delay_seconds_;
  std::deque<Message> queue_;
  bool sending_ = false;
};

class Inbox : public Channel {
 public:
  // Messages of `count` floats from `peer` (its rank in `pair`), tags 0, 1, 2, ...
  Inbox(std::unique_ptr<Collective> pair, int peer, size_t count);
  ~Inbox();

  // Receives `messages` more, continuing the tag sequence.
  void Expect(int messages);
  // The message `tag`, waiting for it (the wait is counted). FailedPrecondition for a
  // tag taken before or outside what Expect asked for; the first receive failure.
  StatusOr<std::vector<float>> Take(uint64_t tag);

 private:
  void Run();

  const size_t count_;
  std::map<uint64_t, std::vector<float>> arrived_;
  uint64_t next_tag_ = 0;   // the next tag the thread receives
  uint64_t end_tag_ = 0;    // receive up to (not including) this tag
  uint64_t taken_ = 0;      // tags below this were taken
};

}  // namespace star::shim
