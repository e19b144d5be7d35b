// fixed_k on the all-reduce architecture: the ring of the fastest k plus children, as
// star/shim/sync_engine.h runs it. The first k ranks of the setting's order form the
// ring; the j-th remaining rank is a child of ring member order[j mod k].
//
// A ring round starts on every ring member at once. A child computes, then sends its
// gradient to its parent (its communication time). Each parent takes the child gradients
// that have arrived by the time it finished computing; the ring all-reduces once every
// member is ready, for as long as its slowest link takes, and updates over the ring's
// samples plus the children's taken this round (a child's gradient computed on older
// parameters is discounted for staleness: progress.h). A child whose gradient was taken
// gets the new parameters when the round ends, takes the ring's iteration count and
// starts again; a late gradient waits for a later round, never dropped.
//
// Switching: once the ring's count reaches stop_at the ring stops; each child still
// computing finishes, and its gradient is carried into the next mode's first update
// (the parent's carry).
#include <algorithm>

#include "sim/mode_engine.h"

namespace star::sim {
namespace {

class FixedKEngine final : public ModeEngine {
 public:
  FixedKEngine(SimState& state, const Setting& setting, double start)
      : st_(state), now_(start) {
    const int n = static_cast<int>(setting.order.size());
    const int k = std::clamp(setting.k, 1, n);
    ring_.assign(setting.order.begin(), setting.order.begin() + k);
    std::sort(ring_.begin(), ring_.end());
    parent_.assign(static_cast<size_t>(n), -1);
    workers_.resize(static_cast<size_t>(n));
    for (int j = 0; k + j < n; ++j) {
      const int child = setting.order[static_cast<size_t>(k + j)];
      parent_[static_cast<size_t>(child)] = setting.order[static_cast<size_t>(j % k)];
      idle_children_.push_back(child);
    }
    std::sort(idle_children_.begin(), idle_children_.end());
    for (int w : ring_) ring_iteration_ = std::max(ring_iteration_, st_.iteration[static_cast<size_t>(w)]);
    ring_compute_.resize(ring_.size());
    ring_communication_.resize(ring_.size());
    ready_.assign(static_cast<size_t>(n), 0);
    q_.Push(start, Kind::kStart);
  }

  bool Next(int64_t stop_at, std::vector<IterationDone>* done) override {
    if (q_.empty()) return false;
    const Kind kind = q_.Pop(&now_);
    if (kind == Kind::kEnd) {
      EndRound(done);
    } else if (ring_iteration_ >= stop_at) {
      Flush(done);
    } else {
      StartRound();
    }
    return true;
  }

  double now() const override { return now_; }

 private:
  enum class Kind { kStart, kEnd };
  struct Child {
    double start = 0, compute = 0, communication = 0, arrival = 0;
    int64_t version = 0;  // the parameters it computes on
  };

  void StartChildren() {
    for (int c : idle_children_) {
      const auto cs = static_cast<size_t>(c);
      Child& ch = workers_[cs];
      const int64_t step = st_.BeginIteration(c);
      ch.start = now_;
      ch.compute = st_.model->Compute(c, step, now_, st_.batch[cs], st_.amp[cs] != 0);
      ch.communication = st_.model->Communication(c, step, now_);
      ch.arrival = now_ + ch.compute + ch.communication;
      ch.version = st_.progress->updates();
      arrivals_.Push(ch.arrival, c);
    }
    idle_children_.clear();
  }

  void StartRound() {
    StartChildren();
    ready_max_ = now_;
    slowest_link_ = 0;
    for (size_t i = 0; i < ring_.size(); ++i) {
      const int w = ring_[i];
      const auto ws = static_cast<size_t>(w);
      const int64_t step = st_.BeginIteration(w);
      ring_compute_[i] = st_.model->Compute(w, step, now_, st_.batch[ws], st_.amp[ws] != 0);
      ring_communication_[i] = st_.model->Communication(w, step, now_);
      ready_[ws] = now_ + ring_compute_[i];
      ready_max_ = std::max(ready_max_, ready_[ws]);
      slowest_link_ = std::max(slowest_link_, ring_communication_[i]);
    }
    // Each parent takes the gradients that arrived by the end of its own compute.
    taken_.clear();
    std::vector<int> later;
    while (!arrivals_.empty() && arrivals_.top_time() <= ready_max_) {
      double arrival = 0;
      const int c = arrivals_.Pop(&arrival);
      if (arrival <= ready_[static_cast<size_t>(parent_[static_cast<size_t>(c)])]) {
        taken_.push_back(c);
      } else {
        later.push_back(c);
      }
    }
    for (int c : later) arrivals_.Push(workers_[static_cast<size_t>(c)].arrival, c);
    std::sort(taken_.begin(), taken_.end());
    q_.Push(ready_max_ + slowest_link_, Kind::kEnd);
  }

  void EndRound(std::vector<IterationDone>* done) {
    const int64_t version = st_.progress->updates();
    int64_t samples = 0;
    double effective = 0;
    for (int w : ring_) samples += st_.batch[static_cast<size_t>(w)];
    effective = static_cast<double>(samples);
    for (int c : taken_) {
      const auto cs = static_cast<size_t>(c);
      samples += st_.batch[cs];
      effective += st_.progress->Discounted(st_.batch[cs], version - workers_[cs].version);
    }
    st_.progress->Update(now_, effective);
    ++ring_iteration_;
    const size_t first = done->size();
    for (size_t i = 0; i < ring_.size(); ++i) {
      const int w = ring_[i];
      const auto ws = static_cast<size_t>(w);
      IterationDone d = Done(w);
      d.compute = ring_compute_[i];
      d.communication = slowest_link_;  // as in groups.cc: the ring's duration
      d.link = RingLink(ring_, ring_communication_, i);
      d.wait = ready_max_ - ready_[ws];
      d.update_batch = samples;
      done->push_back(d);
    }
    for (int c : taken_) {
      const Child& ch = workers_[static_cast<size_t>(c)];
      IterationDone d = Done(c);
      d.compute = ch.compute;
      d.communication = ch.communication;
      d.wait = now_ - ch.arrival;
      d.update_batch = samples;
      done->push_back(d);
      idle_children_.push_back(c);
    }
    std::sort(done->begin() + static_cast<std::ptrdiff_t>(first), done->end(),
              [](const IterationDone& a, const IterationDone& b) { return a.worker < b.worker; });
    taken_.clear();
    q_.Push(now_, Kind::kStart);
  }

  // The ring stopped: children still computing finish; their gradients are carried into
  // the next mode's first update.
  void Flush(std::vector<IterationDone>* done) {
    idle_children_.clear();
    const int64_t version = st_.progress->updates();
    while (!arrivals_.empty()) {
      double arrival = 0;
      const int c = arrivals_.Pop(&arrival);
      const auto cs = static_cast<size_t>(c);
      const Child& ch = workers_[cs];
      st_.progress->Carry(st_.progress->Discounted(st_.batch[cs], version - ch.version));
      IterationDone d = Done(c);
      d.end = std::max(arrival, now_);
      d.compute = ch.compute;
      d.communication = ch.communication;
      d.wait = d.end - arrival;
      done->push_back(d);
    }
  }

  // A completion record for worker w at now_ with the ring's count.
  IterationDone Done(int w) {
    const auto ws = static_cast<size_t>(w);
    st_.iteration[ws] = std::max(st_.iteration[ws], ring_iteration_);
    IterationDone d;
    d.worker = w;
    d.iteration = st_.iteration[ws];
    d.end = now_;
    d.batch = st_.batch[ws];
    d.amp = st_.amp[ws] != 0;
    return d;
  }

  SimState& st_;
  double now_;
  std::vector<int> ring_;    // ascending ranks
  std::vector<int> parent_;  // per rank: its parent, -1 for ring members
  std::vector<Child> workers_;  // per rank (children only)
  std::vector<int> idle_children_;  // children to start at the next round's start
  std::vector<int> taken_;          // children whose gradients this round takes
  EventQueue<int> arrivals_;        // child gradients in flight, by arrival
  EventQueue<Kind> q_;
  int64_t ring_iteration_ = 0;
  double ready_max_ = 0, slowest_link_ = 0;
  std::vector<double> ready_;  // per rank: when a ring member finished computing
  std::vector<double> ring_compute_, ring_communication_;
};

}  // namespace

std::unique_ptr<ModeEngine> MakeFixedKEngine(SimState& state, const Setting& setting,
                                             double start) {
  return std::make_unique<FixedKEngine>(state, setting, start);
}

}  // namespace star::sim
