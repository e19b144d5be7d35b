// The parameter-server architecture, as star/shim/parameter_server.h runs it: each worker
// computes, pushes its gradient over its link (half its communication time), waits for
// the servers' reply, and pulls the new parameters (the other half). The servers hold
// 1/P of the model each and work in parallel, so one gradient costs them
// server_update_seconds / P; gradients queue for them in arrival order.
//  - ssgd and fixed_k: an update fires once k gradients computed on the current
//    parameters are in (k = n for ssgd); gradients computed on older parameters (late)
//    join the next update, discounted for staleness (progress.h). An update also fires
//    when every worker still running has a gradient waiting. Every worker whose gradient
//    the update summed gets its parameters.
//  - asgd: every gradient is applied alone on arrival, discounted for the updates applied
//    since its worker pulled; the worker gets the new parameters at once. ASGD needs
//    1 + asgd_cpu_overhead times the CPU and 1 + asgd_bandwidth_overhead times the bytes
//    of SSGD (STAR's measurements, ALGORITHMS.md section 3): its compute and
//    communication times scale by those factors.
#include <algorithm>

#include "sim/mode_engine.h"

namespace star::sim {
namespace {

class ParameterServerEngine final : public ModeEngine {
 public:
  ParameterServerEngine(SimState& state, const Setting& setting, double start)
      : st_(state),
        now_(start),
        n_(state.scenario->workers),
        asgd_(setting.mode == api::SyncMode::kAsgd),
        k_(setting.mode == api::SyncMode::kSsgd ? n_ : std::clamp(setting.k, 1, n_)),
        service_(state.scenario->server_update_seconds / state.scenario->parameter_servers),
        workers_(static_cast<size_t>(n_)),
        running_(n_) {
    if (asgd_) {
      overhead_.cpu = 1 + state.scenario->asgd_cpu_overhead;
      overhead_.bandwidth = 1 + state.scenario->asgd_bandwidth_overhead;
    }
    for (int w = 0; w < n_; ++w) q_.Push(start, Event{Kind::kStart, w});
  }

  bool Next(int64_t stop_at, std::vector<IterationDone>* done) override {
    if (q_.empty()) return false;
    const Event e = q_.Pop(&now_);
    switch (e.kind) {
      case Kind::kStart: Start(e.worker, stop_at); break;
      case Kind::kArrival: Arrive(e.worker); break;
      case Kind::kEnd: End(e.worker, done); break;
    }
    return true;
  }

  double now() const override { return now_; }

 private:
  enum class Kind { kStart, kArrival, kEnd };
  struct Event {
    Kind kind;
    int worker;
  };
  struct Worker {
    double compute = 0, communication = 0, arrival = 0, wait = 0;
    int64_t version = 0;  // the parameters its gradient is computed on
    int64_t update_batch = 0;
  };

  void Start(int w, int64_t stop_at) {
    const auto ws = static_cast<size_t>(w);
    if (st_.iteration[ws] >= stop_at) {
      --running_;
      if (!asgd_ && waiting_.size() == static_cast<size_t>(running_) && running_ > 0) Fire();
      return;
    }
    Worker& wk = workers_[ws];
    const int64_t step = st_.BeginIteration(w);
    wk.compute = st_.model->Compute(w, step, now_, st_.batch[ws], st_.amp[ws] != 0,
                                    overhead_);
    wk.communication = st_.model->Communication(w, step, now_, overhead_);
    wk.arrival = now_ + wk.compute + wk.communication / 2;
    wk.version = st_.progress->updates();
    q_.Push(wk.arrival, Event{Kind::kArrival, w});
  }

  void Arrive(int w) {
    const auto ws = static_cast<size_t>(w);
    Worker& wk = workers_[ws];
    if (asgd_) {
      const double begin = std::max(now_, server_free_);
      server_free_ = begin + service_;
      const int64_t staleness = st_.progress->updates() - wk.version;
      st_.progress->Update(server_free_, st_.progress->Discounted(st_.batch[ws], staleness));
      wk.wait = begin - now_;
      wk.update_batch = st_.batch[ws];
      q_.Push(server_free_ + wk.communication / 2, Event{Kind::kEnd, w});
      return;
    }
    if (wk.version == st_.progress->updates()) ++fresh_;
    waiting_.push_back(w);
    if (fresh_ >= k_ || waiting_.size() == static_cast<size_t>(running_)) Fire();
  }

  // Applies one update over every waiting gradient and answers their workers.
  void Fire() {
    const double begin = std::max(now_, server_free_);
    server_free_ = begin + service_;
    const int64_t version = st_.progress->updates();
    int64_t samples = 0;
    double effective = 0;
    for (int w : waiting_) {
      const auto ws = static_cast<size_t>(w);
      samples += st_.batch[ws];
      effective += st_.progress->Discounted(st_.batch[ws], version - workers_[ws].version);
    }
    st_.progress->Update(server_free_, effective);
    for (int w : waiting_) {
      Worker& wk = workers_[static_cast<size_t>(w)];
      wk.wait = server_free_ - wk.arrival;
      wk.update_batch = samples;
      q_.Push(server_free_ + wk.communication / 2, Event{Kind::kEnd, w});
    }
    waiting_.clear();
    fresh_ = 0;
  }

  void End(int w, std::vector<IterationDone>* done) {
    const auto ws = static_cast<size_t>(w);
    const Worker& wk = workers_[ws];
    IterationDone d;
    d.worker = w;
    d.iteration = ++st_.iteration[ws];
    d.end = now_;
    d.compute = wk.compute;
    d.communication = wk.communication;
    d.wait = wk.wait;
    d.batch = st_.batch[ws];
    d.amp = st_.amp[ws] != 0;
    d.update_batch = wk.update_batch;
    done->push_back(d);
    q_.Push(now_, Event{Kind::kStart, w});
  }

  SimState& st_;
  double now_;
  const int n_;
  const bool asgd_;
  const int k_;
  const double service_;  // server seconds per gradient
  Overhead overhead_;
  std::vector<Worker> workers_;
  int running_;                // workers not stopped
  std::vector<int> waiting_;   // gradients waiting for an update (sync modes)
  int fresh_ = 0;              // of those, computed on the current parameters
  double server_free_ = 0;
  EventQueue<Event> q_;
};

}  // namespace

std::unique_ptr<ModeEngine> MakeParameterServerEngine(SimState& state, const Setting& setting,
                                                      double start) {
  return std::make_unique<ParameterServerEngine>(state, setting, start);
}

}  // namespace star::sim
