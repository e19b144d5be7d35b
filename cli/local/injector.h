// Injector: applies and lifts the run's --inject contention at their times, through the
// sandbox's Host (see runtime.h for what each kind does), and the CPU quota arithmetic
// every cgroup of the run shares.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "local/inject_spec.h"
#include "local/run_event.h"
#include "local/sandbox.h"
#include "star/core/status.h"

namespace star::local {

// A short CFS period: with 100 ms, a worker limited to a fraction of a CPU runs in bursts
// and an iteration of tens of milliseconds waits for the next period (jitter of a whole
// period); 20 ms keeps that jitter small.
constexpr int64_t kCfsPeriodUs = 20000;
// The CFS quota per kCfsPeriodUs of `millicores`.
constexpr int64_t QuotaUs(int64_t millicores) { return millicores * kCfsPeriodUs / 1000; }

struct ActiveInjection {
  Injection spec;
  bool applied = false;
  bool lifted = false;
  bool available = true;
  int proc = -1;  // the neighbor's process handle (InjectorOptions::start_neighbor)
};

struct InjectorOptions {
  Sandbox* sandbox = nullptr;    // required; slot of worker w = servers + w
  int servers = 0;               // parameter servers (the first slots)
  int64_t worker_millicores = 0; // a worker slot's CPU capacity
  // Starts the busy neighbor of injection `in` in its slot's neighbor cgroup; returns a
  // handle for stop_neighbor. Required when an injection is kNeighbor.
  std::function<StatusOr<int>(const Injection& in)> start_neighbor;
  // Stops (and reaps) the neighbor with handle `proc`.
  std::function<void(int proc)> stop_neighbor;
  // Records "inject" and "lift" (worker: the injection's; detail: its text). Required.
  RunEventSink event;
  // A note for the user (optional).
  std::function<void(const std::string&)> notice;
};

class Injector {
 public:
  // Bandwidth and delay injections are unavailable (noticed, skipped) without network.
  Injector(InjectorOptions options, const std::vector<Injection>& injections);

  // Applies every available injection whose start is due at run time `t` and lifts every
  // applied one whose end is due. An injection the host says is Unavailable (e.g. no
  // netem) is skipped with a notice. Other errors are returned, prefixed with
  // `--inject "<text>"`; the injections after it wait for the next Tick.
  [[nodiscard]] Status Tick(double t);

  std::vector<ActiveInjection>& injections() { return injections_; }
  const std::vector<ActiveInjection>& injections() const { return injections_; }

 private:
  Status Apply(ActiveInjection& a);
  Status Lift(ActiveInjection& a);
  void Notice(const std::string& s) const {
    if (o_.notice) o_.notice(s);
  }

  InjectorOptions o_;
  std::vector<ActiveInjection> injections_;
};

}  // namespace star::local
