// `--inject SPEC`: contention injected into a `star local` run (ARCHITECTURE.md).
//
//   worker=W,cpu=F[,start=S][,end=S]                keep fraction F of worker W's CPU
//   worker=W,neighbor=N[,guarantee=C][,start..]     N busy co-located threads share its CPU;
//                                                   reallocation never takes the neighbor
//                                                   below C CPUs (e.g. 0.2 or 200m)
//   worker=W,bandwidth=RATE[,start..]               shape its link (both directions)
//   worker=W,delay=D[,start..]                      add one-way delay to its link
//
// Durations are written like 12s, 500ms, 2m or 1h; rates like tc's: 20mbit, 500kbit,
// 1gbit, 8000bit, 100bps (bytes/s), 2mbps (k/m/g are powers of 1000); workers are
// numbered from 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "star/core/status.h"

namespace star::local {

enum class InjectionKind { kCpu, kNeighbor, kBandwidth, kDelay };
std::string_view ToString(InjectionKind k);  // "cpu", "neighbor", "bandwidth", "delay"

struct Injection {
  std::string text;  // the SPEC as given (for messages and the report)
  int worker = 0;    // >= 0
  InjectionKind kind = InjectionKind::kCpu;
  double cpu_fraction = 1;              // kCpu: in (0, 1]
  int neighbor_threads = 0;             // kNeighbor: 1..64
  double neighbor_guarantee_cpus = 0;   // kNeighbor: >= 0 (0 = no guarantee)
  int64_t bandwidth_bps = 0;            // kBandwidth: bits per second, >= 8000
  double delay_seconds = 0;             // kDelay: in (0, 10]
  double start_seconds = 0;             // job time; default 0
  std::optional<double> end_seconds;    // > start; absent = until the job ends
};

// Parses one SPEC. Errors are InvalidArgument `--inject "SPEC": <key>: <reason>`, e.g.
// `--inject "worker=1,cpu=2": cpu: must be in (0, 1], got 2`.
StatusOr<Injection> ParseInjection(std::string_view spec);

// Checks a run's injections together: worker < workers, and no two injections of the same
// kind on the same worker overlap in time (the error names both). workers >= 1.
Status ValidateInjections(const std::vector<Injection>& injections, int workers);

// "12s", "500ms", "2m", "1h", "1.5s", "0s" -> seconds (>= 0). A bare number is an error.
StatusOr<double> ParseDuration(std::string_view text);
// "20mbit", "500kbit", "1gbit", "8000bit", "100bps", "2mbps", "1.5mbit" -> bits per second.
StatusOr<int64_t> ParseRate(std::string_view text);
// Kubernetes CPU quantities: "500m", "1", "1.5", "0.25" -> millicores (> 0).
StatusOr<int64_t> ParseCpuQuantity(std::string_view text);

}  // namespace star::local
