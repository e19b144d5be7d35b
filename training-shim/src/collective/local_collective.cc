// LocalCollective: ranks as threads in one process, meeting in a shared Hub.
//
// Collectives: each rank numbers its collective calls; the k-th calls of all ranks meet in
// round k, which holds every rank's contribution and is reduced in rank order once all
// have arrived (so results are deterministic). Point to point: a mailbox of messages; a
// Send waits until a receiver has taken its message (the same rendezvous semantics as
// Gloo's TCP transport, so code that works here does not deadlock there).
#include "star/shim/local_collective.h"

#include <algorithm>
#include <condition_variable>
#include <list>
#include <map>
#include <mutex>
#include <string>

namespace star::shim {
namespace {

enum class Kind { kAllReduce, kBroadcast, kBarrier };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kAllReduce: return "AllReduceSum";
    case Kind::kBroadcast: return "Broadcast";
    case Kind::kBarrier: return "Barrier";
  }
  return "?";
}

struct Round {
  Kind kind;
  size_t count = 0;
  int root = 0;
  std::vector<std::vector<float>> contributions;  // by rank
  std::vector<bool> arrived;
  int num_arrived = 0;
  int num_departed = 0;
  std::vector<float> result;
  bool done = false;
};

struct Message {
  uint64_t id;
  int src;
  int dst;
  uint32_t tag;
  std::vector<float> data;
};

class Hub;

struct SplitMeeting {
  std::shared_ptr<Hub> child;
  int num_arrived = 0;
  int num_departed = 0;
};

class Hub : public std::enable_shared_from_this<Hub> {
 public:
  Hub(int size, std::chrono::milliseconds timeout)
      : size_(size), timeout_(timeout), alive_(static_cast<size_t>(size), true) {}

  int size() const { return size_; }

  void Leave(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    alive_[static_cast<size_t>(rank)] = false;
    cv_.notify_all();
  }

  Status Collective(int rank, uint64_t seq, Kind kind, float* data, size_t count, int root) {
    std::unique_lock<std::mutex> lock(mu_);
    auto [it, inserted] = rounds_.try_emplace(seq);
    Round& round = it->second;
    if (inserted) {
      round.kind = kind;
      round.count = count;
      round.root = root;
      round.contributions.resize(static_cast<size_t>(size_));
      round.arrived.assign(static_cast<size_t>(size_), false);
    } else if (round.kind != kind || round.count != count || round.root != root) {
      return Status::InvalidArgument(
          "local collective: rank " + std::to_string(rank) + " called " + KindName(kind) +
          "(count " + std::to_string(count) + ", root " + std::to_string(root) +
          ") where another rank called " + KindName(round.kind) + "(count " +
          std::to_string(round.count) + ", root " + std::to_string(round.root) +
          ") as collective #" + std::to_string(seq));
    }
    if (kind == Kind::kAllReduce || (kind == Kind::kBroadcast && rank == root)) {
      round.contributions[static_cast<size_t>(rank)].assign(data, data + count);
    }
    round.arrived[static_cast<size_t>(rank)] = true;
    if (++round.num_arrived == size_) {
      Complete(round);
      cv_.notify_all();
    }
    int missing = -1;
    const bool ok = cv_.wait_for(lock, timeout_, [&] {
      if (round.done) return true;
      for (int r = 0; r < size_; ++r) {
        if (!round.arrived[static_cast<size_t>(r)] && !alive_[static_cast<size_t>(r)]) {
          missing = r;
          return true;
        }
      }
      return false;
    });
    if (!round.done) {
      std::string who;
      for (int r = 0; r < size_; ++r) {
        if (!round.arrived[static_cast<size_t>(r)]) who += " " + std::to_string(r);
      }
      const std::string what = std::string("local collective: ") + KindName(kind) + " on rank " +
                               std::to_string(rank);
      if (!ok) {
        return Status::DeadlineExceeded(what + " timed out after " +
                                        std::to_string(timeout_.count()) +
                                        " ms waiting for rank(s)" + who);
      }
      return Status::Unavailable(what + ": rank " + std::to_string(missing) + " is gone");
    }
    if (kind != Kind::kBarrier && count > 0) std::copy(round.result.begin(), round.result.end(), data);
    if (++round.num_departed == size_) rounds_.erase(it);
    return Status::Ok();
  }

  Status Send(int src, int dst, uint32_t tag, const float* data, size_t count) {
    STAR_RETURN_IF_ERROR(CheckPeer("Send", src, dst));
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t id = next_message_id_++;
    mailbox_.push_back(Message{id, src, dst, tag, std::vector<float>(data, data + count)});
    cv_.notify_all();
    auto pending = [&] {
      return std::find_if(mailbox_.begin(), mailbox_.end(),
                          [&](const Message& m) { return m.id == id; });
    };
    const bool ok = cv_.wait_for(lock, timeout_, [&] {
      return pending() == mailbox_.end() || !alive_[static_cast<size_t>(dst)];
    });
    auto it = pending();
    if (it == mailbox_.end()) return Status::Ok();
    mailbox_.erase(it);
    const std::string what = "local collective: Send from rank " + std::to_string(src) +
                             " to rank " + std::to_string(dst) + " (tag " +
                             std::to_string(tag) + ")";
    if (!ok) {
      return Status::DeadlineExceeded(what + " not received within " +
                                      std::to_string(timeout_.count()) + " ms");
    }
    return Status::Unavailable(what + ": rank " + std::to_string(dst) + " is gone");
  }

  StatusOr<int> Recv(int dst, const std::vector<int>& peers, uint32_t tag, float* data,
                     size_t count) {
    if (peers.empty()) return Status::InvalidArgument("local collective: Recv from no peers");
    for (int p : peers) STAR_RETURN_IF_ERROR(CheckPeer("Recv", dst, p));
    std::unique_lock<std::mutex> lock(mu_);
    auto match = [&] {
      return std::find_if(mailbox_.begin(), mailbox_.end(), [&](const Message& m) {
        return m.dst == dst && m.tag == tag &&
               std::find(peers.begin(), peers.end(), m.src) != peers.end();
      });
    };
    auto all_gone = [&] {
      return std::all_of(peers.begin(), peers.end(),
                         [&](int p) { return !alive_[static_cast<size_t>(p)]; });
    };
    const bool ok =
        cv_.wait_for(lock, timeout_, [&] { return match() != mailbox_.end() || all_gone(); });
    auto it = match();
    std::string from;
    for (int p : peers) from += " " + std::to_string(p);
    const std::string what = "local collective: Recv on rank " + std::to_string(dst) +
                             " from rank(s)" + from + " (tag " + std::to_string(tag) + ")";
    if (it == mailbox_.end()) {
      if (!ok) {
        return Status::DeadlineExceeded(what + " timed out after " +
                                        std::to_string(timeout_.count()) + " ms");
      }
      return Status::Unavailable(what + ": sender(s) gone");
    }
    Message m = std::move(*it);
    mailbox_.erase(it);
    cv_.notify_all();
    if (m.data.size() != count) {
      return Status::InvalidArgument(what + ": got " + std::to_string(m.data.size()) +
                                     " floats from rank " + std::to_string(m.src) +
                                     ", expected " + std::to_string(count));
    }
    std::copy(m.data.begin(), m.data.end(), data);
    return m.src;
  }

  // Meets the other members of a split; returns the child hub.
  StatusOr<std::shared_ptr<Hub>> Split(int rank, const std::vector<int>& members,
                                       const std::string& name) {
    std::string key = name + "|";
    for (int m : members) key += std::to_string(m) + ",";
    std::unique_lock<std::mutex> lock(mu_);
    SplitMeeting& meeting = splits_[key];
    if (!meeting.child) {
      meeting.child = std::make_shared<Hub>(static_cast<int>(members.size()), timeout_);
    }
    ++meeting.num_arrived;
    cv_.notify_all();
    int gone = -1;
    const int n = static_cast<int>(members.size());
    const bool ok = cv_.wait_for(lock, timeout_, [&] {
      if (meeting.num_arrived >= n) return true;
      for (int m : members) {
        if (!alive_[static_cast<size_t>(m)]) {
          gone = m;
          return true;
        }
      }
      return false;
    });
    std::shared_ptr<Hub> child = meeting.child;
    const bool complete = meeting.num_arrived >= n;
    if (complete) {
      if (++meeting.num_departed == n) splits_.erase(key);
      return child;
    }
    --meeting.num_arrived;
    if (meeting.num_arrived == 0) splits_.erase(key);
    const std::string what = "local collective: Split \"" + name + "\" on rank " +
                             std::to_string(rank);
    if (!ok) {
      return Status::DeadlineExceeded(what + ": members did not all arrive within " +
                                      std::to_string(timeout_.count()) + " ms");
    }
    return Status::Unavailable(what + ": rank " + std::to_string(gone) + " is gone");
  }

 private:
  Status CheckPeer(const char* op, int self, int peer) const {
    if (peer < 0 || peer >= size_ || peer == self) {
      return Status::InvalidArgument(std::string("local collective: ") + op + " on rank " +
                                     std::to_string(self) + ": bad peer " +
                                     std::to_string(peer) + " (size " +
                                     std::to_string(size_) + ")");
    }
    return Status::Ok();
  }

  void Complete(Round& round) {
    switch (round.kind) {
      case Kind::kAllReduce:
        round.result.assign(round.count, 0.0f);
        for (const auto& c : round.contributions) {
          for (size_t i = 0; i < round.count; ++i) round.result[i] += c[i];
        }
        break;
      case Kind::kBroadcast:
        round.result = round.contributions[static_cast<size_t>(round.root)];
        break;
      case Kind::kBarrier:
        break;
    }
    round.contributions.clear();
    round.done = true;
  }

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> alive_;
  std::map<uint64_t, Round> rounds_;
  std::list<Message> mailbox_;
  uint64_t next_message_id_ = 0;
  std::map<std::string, SplitMeeting> splits_;
};

class LocalCollective final : public Collective {
 public:
  LocalCollective(std::shared_ptr<Hub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  ~LocalCollective() override { hub_->Leave(rank_); }

  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }

  Status AllReduceSum(float* data, size_t count) override {
    if (size() == 1) return Status::Ok();  // the sum over one rank is its own data
    return hub_->Collective(rank_, seq_++, Kind::kAllReduce, data, count, 0);
  }
  Status Broadcast(float* data, size_t count, int root) override {
    if (root < 0 || root >= size()) {
      return Status::InvalidArgument("local collective: Broadcast root " +
                                     std::to_string(root) + " out of range");
    }
    return hub_->Collective(rank_, seq_++, Kind::kBroadcast, data, count, root);
  }
  Status Barrier() override {
    return hub_->Collective(rank_, seq_++, Kind::kBarrier, nullptr, 0, 0);
  }
  Status Send(const float* data, size_t count, int peer, uint32_t tag) override {
    return hub_->Send(rank_, peer, tag, data, count);
  }
  Status Recv(float* data, size_t count, int peer, uint32_t tag) override {
    return hub_->Recv(rank_, {peer}, tag, data, count).status();
  }
  StatusOr<int> RecvFromAny(float* data, size_t count, const std::vector<int>& peers,
                            uint32_t tag) override {
    return hub_->Recv(rank_, peers, tag, data, count);
  }

  StatusOr<std::unique_ptr<Collective>> Split(const std::vector<int>& members,
                                              const std::string& name) override {
    auto self = std::find(members.begin(), members.end(), rank_);
    if (self == members.end() || !std::is_sorted(members.begin(), members.end()) ||
        std::adjacent_find(members.begin(), members.end()) != members.end() ||
        members.front() < 0 || members.back() >= size()) {
      return Status::InvalidArgument("local collective: Split \"" + name + "\" on rank " +
                                     std::to_string(rank_) +
                                     ": members must be ascending ranks including this one");
    }
    STAR_ASSIGN_OR_RETURN(std::shared_ptr<Hub> child, hub_->Split(rank_, members, name));
    return std::unique_ptr<Collective>(
        new LocalCollective(std::move(child), static_cast<int>(self - members.begin())));
  }

 private:
  std::shared_ptr<Hub> hub_;
  const int rank_;
  uint64_t seq_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<Collective>> NewLocalGroup(int size,
                                                       std::chrono::milliseconds timeout) {
  auto hub = std::make_shared<Hub>(size, timeout);
  std::vector<std::unique_ptr<Collective>> group;
  for (int r = 0; r < size; ++r) group.push_back(std::make_unique<LocalCollective>(hub, r));
  return group;
}

}  // namespace star::shim
