// ModeEngine: the discrete-event simulation of one synchronization mode (ALGORITHMS.md
// section 3) between two switches of the job.
//
// An engine starts with every worker free at one time (the job's start or a switch
// barrier) and processes one event per Next() call, in time order (ties in the order
// they were scheduled): it draws iteration times from the WorkerModel, records model
// updates in Progress, and reports each iteration a worker completes. A worker starts
// a new iteration only while its iteration count is below `stop_at` (the pending
// decision's apply_at_iteration); a worker already past it when the decision comes
// stops at its next iteration boundary (the real engine would fail such a late
// decision; the loop's apply margin keeps it from happening). When every worker has
// stopped, Next returns false: the segment is over, and the driver (simulator.h) holds
// the workers at a barrier and applies the decision. A decision of batches or AMP only
// (api::SameSynchronization) is no switch and stops nobody: the driver holds its
// settings in SimState::changes, and each worker takes them up when it begins the
// decision's iteration (SimState::BeginIteration).
//
// Engines (one file each):
//   groups.cc            AllReduce ssgd (one group of all workers) and mode groups: each
//                        group starts its iterations together, all-reduces when its
//                        slowest member is ready, for as long as its slowest link takes.
//   fixed_k.cc           AllReduce fixed_k: the ring of the fastest k plus children, as
//                        star/shim/sync_engine.h runs it.
//   parameter_server.cc  the ParameterServer architecture (ssgd, fixed_k, asgd) as
//                        star/shim/parameter_server.h runs it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <vector>

#include "sim/progress.h"
#include "sim/scenario.h"
#include "sim/worker_model.h"
#include "star/core/api/decision.h"
#include "star/core/api/worker_report.h"

namespace star::sim {

// What the job runs: the setting a Decision describes.
struct Setting {
  api::SyncMode mode = api::SyncMode::kSsgd;
  int k = 1;
  // fixed_k: every rank, fastest first (the first k form the ring).
  std::vector<int> order;
  // groups: a partition of the ranks.
  std::vector<std::vector<int>> groups;
  std::vector<int64_t> batches;  // per worker
  std::vector<char> amp;         // per worker: 1 = AMP on
};

// The job's start: SSGD, AMP off, equal batches (batch::EqualBatches), as the launcher
// starts workers.
Setting BaselineSetting(int workers, int64_t batch_per_worker);
// The setting `d` describes on top of `previous` (a decision without per-worker entries
// keeps the batches and AMP flags in force). Ranks missing from a fixed_k order follow
// in ascending order; ranks missing from a groups partition get a group each.
Setting SettingOf(const api::Decision& d, const Setting& previous, int workers);

// One iteration a worker completed.
struct IterationDone {
  int worker = 0;
  int64_t iteration = 0;  // the worker's iteration count after it
  double end = 0;         // when it completed (the worker is free again)
  double compute = 0;
  double communication = 0;
  double wait = 0;  // blocked on peers or on a parameter server
  int64_t batch = 1;
  bool amp = false;
  // Samples summed into the update this iteration's gradient went into (undiscounted);
  // 0 when it went into none yet.
  int64_t update_batch = 0;
  // The link from its ring predecessor, as the shim's timed ring reports it (ring
  // members only).
  std::optional<api::LinkReading> link;
};

// The link into member i of a ring over `members` (ascending ranks, as the shim's rings
// are) whose members' own all-reduce times (each at its own link's speed) are `own`:
// one hop of the predecessor's, 1/(2 (n - 1)) of it, per nominal byte. nullopt alone.
std::optional<api::LinkReading> RingLink(const std::vector<int>& members,
                                         const std::vector<double>& own, size_t i);

// What the engines share with the driver. The vectors are indexed by rank.
struct SimState {
  const Scenario* scenario = nullptr;
  const WorkerModel* model = nullptr;
  Progress* progress = nullptr;
  // The job's architecture (the spec's, after the policy: ASGD runs on parameter servers).
  api::Architecture architecture = api::Architecture::kAllReduce;
  std::vector<int64_t> steps;      // iterations each worker computed (the jitter index)
  std::vector<int64_t> iteration;  // each worker's iteration count
  // Each worker's batch and AMP flag in force (set at a switch), and the changes a
  // decision of batches or AMP only (no switch) holds for it until its iteration.
  std::vector<int64_t> batch;
  std::vector<char> amp;
  struct Change {
    int64_t at = 0;  // apply_at_iteration
    int64_t batch = 1;
    char amp = 0;
  };
  std::vector<std::deque<Change>> changes;  // per worker, by `at`

  // Worker `w` begins an iteration: takes up its changes due by its iteration count
  // (as star/shim's WorkerSession does) and returns its step index (steps[w]++).
  int64_t BeginIteration(int w);
  // Takes up every held change at once (at a switch, which every worker reaches).
  void TakeUpAllChanges();
};

class ModeEngine {
 public:
  virtual ~ModeEngine() = default;
  // Processes the next event: appends the iterations it completed (in time order) to
  // *done. False, appending nothing, once every worker has stopped.
  virtual bool Next(int64_t stop_at, std::vector<IterationDone>* done) = 0;
  // The time of the last event processed.
  [[nodiscard]] virtual double now() const = 0;
};

// The engine for `setting` on the scenario's architecture, every worker free at `start`,
// the setting's batches and AMP flags in force (state.batch, state.amp).
std::unique_ptr<ModeEngine> MakeEngine(SimState& state, const Setting& setting, double start);

std::unique_ptr<ModeEngine> MakeGroupsEngine(SimState& state, std::vector<std::vector<int>> groups,
                                             double start);
std::unique_ptr<ModeEngine> MakeFixedKEngine(SimState& state, const Setting& setting,
                                             double start);
std::unique_ptr<ModeEngine> MakeParameterServerEngine(SimState& state, const Setting& setting,
                                                      double start);

// A time-ordered event queue; events at equal times come out in the order pushed.
template <typename Payload>
class EventQueue {
 public:
  void Push(double time, Payload p) { q_.push(Entry{time, seq_++, p}); }
  [[nodiscard]] bool empty() const { return q_.empty(); }
  [[nodiscard]] double top_time() const { return q_.top().time; }
  // Removes and returns the earliest event; *time is set to its time.
  Payload Pop(double* time) {
    Entry e = q_.top();
    q_.pop();
    *time = e.time;
    return e.payload;
  }

 private:
  struct Entry {
    double time;
    uint64_t seq;
    Payload payload;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.time > b.time || (a.time == b.time && a.seq > b.seq);
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, Later> q_;
  uint64_t seq_ = 0;
};

}  // namespace star::sim
