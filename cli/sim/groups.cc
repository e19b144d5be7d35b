// Synchronous groups on the all-reduce architecture: mode groups, and ssgd as one group
// of every worker. A group starts an iteration on all its members at once; its all-reduce
// starts when the slowest member has computed and lasts as long as the slowest member's
// link takes (a ring all-reduce moves at its slowest link). Each member reports the
// all-reduce's duration as its communication time, as the shim measures it (a slow link
// slows every member's ring steps alike), and the time until the slowest member was
// ready as its wait. Every group updates its parameters (its own
// copy with the scenario's group_replicas: progress.h) with the samples of its members,
// undiscounted (groups are synchronous inside).
#include <algorithm>
#include <utility>

#include "sim/mode_engine.h"

namespace star::sim {
namespace {

class GroupsEngine final : public ModeEngine {
 public:
  GroupsEngine(SimState& state, std::vector<std::vector<int>> groups, double start)
      : st_(state), now_(start) {
    groups_.reserve(groups.size());
    for (auto& members : groups) {
      Group g;
      std::sort(members.begin(), members.end());
      for (int w : members) g.iteration = std::max(g.iteration, Iteration(w));
      g.members = std::move(members);
      g.compute.resize(g.members.size());
      g.communication.resize(g.members.size());
      groups_.push_back(std::move(g));
    }
    for (size_t i = 0; i < groups_.size(); ++i) q_.Push(start, Event{Kind::kStart, i});
  }

  bool Next(int64_t stop_at, std::vector<IterationDone>* done) override {
    if (q_.empty()) return false;
    const Event e = q_.Pop(&now_);
    Group& g = groups_[e.group];
    if (e.kind == Kind::kStart) {
      if (g.iteration < stop_at) Start(g, e.group);
    } else {
      End(g, e.group, done);
    }
    return true;
  }

  double now() const override { return now_; }

 private:
  enum class Kind { kStart, kEnd };
  struct Event {
    Kind kind;
    size_t group;
  };
  struct Group {
    std::vector<int> members;  // ascending ranks
    int64_t iteration = 0;
    double start = 0;
    double ready = 0;  // when the slowest member has computed
    double slowest_link = 0;
    std::vector<double> compute, communication;  // this round, per member
  };

  int64_t& Iteration(int w) { return st_.iteration[static_cast<size_t>(w)]; }

  void Start(Group& g, size_t index) {
    g.start = now_;
    g.ready = now_;
    g.slowest_link = 0;
    for (size_t i = 0; i < g.members.size(); ++i) {
      const int w = g.members[i];
      const auto ws = static_cast<size_t>(w);
      const int64_t step = st_.BeginIteration(w);
      g.compute[i] = st_.model->Compute(w, step, now_, st_.batch[ws], st_.amp[ws] != 0);
      g.communication[i] = st_.model->Communication(w, step, now_);
      g.ready = std::max(g.ready, now_ + g.compute[i]);
      g.slowest_link = std::max(g.slowest_link, g.communication[i]);
    }
    q_.Push(g.ready + g.slowest_link, Event{Kind::kEnd, index});
  }

  void End(Group& g, size_t index, std::vector<IterationDone>* done) {
    int64_t samples = 0;
    for (int w : g.members) samples += st_.batch[static_cast<size_t>(w)];
    st_.progress->Update(now_, static_cast<double>(samples), index);
    ++g.iteration;
    for (size_t i = 0; i < g.members.size(); ++i) {
      const int w = g.members[i];
      const auto ws = static_cast<size_t>(w);
      Iteration(w) = g.iteration;
      IterationDone d;
      d.worker = w;
      d.iteration = g.iteration;
      d.end = now_;
      d.compute = g.compute[i];
      d.communication = g.slowest_link;  // each member is in the ring until it ends
      d.link = RingLink(g.members, g.communication, i);
      d.wait = g.ready - (g.start + g.compute[i]);
      d.batch = st_.batch[ws];
      d.amp = st_.amp[ws] != 0;
      d.update_batch = samples;
      done->push_back(d);
    }
    q_.Push(now_, Event{Kind::kStart, index});
  }

  SimState& st_;
  std::vector<Group> groups_;
  EventQueue<Event> q_;
  double now_;
};

}  // namespace

std::unique_ptr<ModeEngine> MakeGroupsEngine(SimState& state, std::vector<std::vector<int>> groups,
                                             double start) {
  return std::make_unique<GroupsEngine>(state, std::move(groups), start);
}

}  // namespace star::sim
