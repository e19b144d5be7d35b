// `--inject SPEC`: contention injected into one worker of a `star local` run
// (docs/ARCHITECTURE.md, "Contracts").
//
//   worker=W,cpu=F[,start=S][,end=S]                keep fraction F of worker W's CPU
//   worker=W,neighbor=N[,guarantee=C][,start..]     N busy co-located threads share its CPU;
//                                                   reallocation never takes the neighbor
//                                                   below C CPUs (e.g. 0.2 or 200m)
//   worker=W,bandwidth=RATE[,start..]               shape its link (both directions)
//   worker=W,bandwidth=RATE,peer=P[,start..]        shape only the link between workers W
//                                                   and P (both directions): each one's
//                                                   uplink holds its traffic to the other
//                                                   to RATE, the rest of the uplink (1gbit
//                                                   or a bwneighbor's link) free for their
//                                                   other links (a slow link between two
//                                                   pipeline stages)
//   worker=W,delay=D[,start..]                      add one-way delay to its link
//   worker=W,delay=D,peer=P                         add one-way delay D to the pipeline link
//                                                   between neighbouring stages W and P,
//                                                   both ways, for the whole run: the stages
//                                                   hold each message D before sending it
//                                                   (STAR_LINK_DELAY; no netem needed)
//   worker=W,bwneighbor=RATE[,guarantee=RATE][,link=RATE][,start..]
//                                                   a co-located sender in the worker's
//                                                   network namespace takes RATE of its
//                                                   uplink (link=RATE, default 1gbit);
//                                                   reallocation never takes it below the
//                                                   guarantee (default 0)
//
// Durations are written like 12s, 500ms, 2m or 1h; rates like tc's: 20mbit, 500kbit,
// 1gbit, 8000bit, 100bps (bytes/s), 2mbps (k/m/g are powers of 1000); workers are
// numbered from 0. All functions here are pure and thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "star/core/status.h"

namespace star::local {

enum class InjectionKind { kCpu, kNeighbor, kBandwidth, kDelay, kBwNeighbor };
// "cpu", "neighbor", "bandwidth", "delay", "bwneighbor"
std::string_view ToString(InjectionKind k);

// A worker's uplink rate under bwneighbor when the spec gives no link=RATE.
inline constexpr int64_t kDefaultLinkBps = 1000000000;

struct Injection {
  std::string text;  // the SPEC as given (for messages and the report)
  int worker = 0;    // >= 0
  InjectionKind kind = InjectionKind::kCpu;
  double cpu_fraction = 1;  // kCpu: keep this fraction of the worker's CPU, in (0, 1]
  int neighbor_threads = 0;  // kNeighbor: N busy threads, 1..64
  // kNeighbor, optional key guarantee=C: CPUs (cores, e.g. 0.2 or 200m) the neighbor is
  // guaranteed; reallocation never takes it below this. Absent = 0 (no guarantee).
  double neighbor_guarantee_cpus = 0;
  int64_t bandwidth_bps = 0;          // kBandwidth: bits per second, >= 8000
  // kBandwidth, optional key peer=P: the other worker of the one link shaped (>= 0, not
  // `worker`; bandwidth_bps is then below the workers' uplink rate, kDefaultLinkBps unless
  // a bwneighbor's link=RATE sets it). Absent = the worker's whole link.
  std::optional<int> peer;
  double delay_seconds = 0;           // kDelay: one-way added delay, in (0, 10]
  // kBwNeighbor: the co-located sender's share of the uplink (bits per second, >= 8000,
  // below link_bps), the least reallocation leaves it (optional key guarantee=RATE, at
  // most bwneighbor_bps; absent = 0), and the uplink's rate (optional key link=RATE).
  int64_t bwneighbor_bps = 0;
  int64_t bwneighbor_guarantee_bps = 0;
  int64_t link_bps = kDefaultLinkBps;
  double start_seconds = 0;           // start=S, seconds since job start; default 0
  std::optional<double> end_seconds;  // end=S, > start; absent = until the job ends
};

// Parses one SPEC: comma-separated key=value pairs, in any order, each key at most once:
// worker=W (required) and exactly one of cpu=F | neighbor=N | bandwidth=RATE | delay=D |
// bwneighbor=RATE, optional start=DUR, end=DUR, guarantee=CPUS (with neighbor) or
// guarantee=RATE (with bwneighbor, at most its rate), link=RATE (with bwneighbor,
// above its rate) and peer=P (with bandwidth, below 1gbit). Spaces around keys
// and values are ignored. Errors are InvalidArgument `--inject "SPEC": <key>: <reason>`:
//   `--inject "worker=1,cpu=2": cpu: must be in (0, 1], got 2`
//   `--inject "worker=1": needs one of cpu, neighbor, bandwidth, delay, bwneighbor`
//   `--inject "worker=1,bwneighbor=2gbit": bwneighbor: must be below the link's rate
//    (1gbit, the default; link=RATE sets it), got 2gbit`
//   `--inject "worker=1,cpu=0.5,neighbor=2": cpu and neighbor are exclusive`
//   `--inject "worker=1,cpu=0.5,peer=2": peer: only with bandwidth`
//   `--inject "worker=1,bandwidth=1mbit,peer=1": peer: must be another worker than 1, got 1`
// (also unknown and duplicate keys, empty pairs, a missing '=', non-numbers, negative values,
// end <= start, start or end on a delay with peer). The upper bound of worker and peer is checked by ValidateInjections.
StatusOr<Injection> ParseInjection(std::string_view spec);

// Checks a job's injections together: every worker and peer < `workers` (the error names
// the spec and the job's worker count), and no two injections of the same kind on the same
// worker overlap in time ([start, end) windows; the error names both specs), nor a delay
// and a bwneighbor (both shape the worker's side of its link), nor a bandwidth with a peer
// and a bwneighbor, delay or bandwidth (with a peer or not) on either of its two workers
// (the peer link takes both workers' uplinks); nor bwneighbors with different link rates
// (the run gives every worker's uplink that one rate), nor a peer's bandwidth at or above
// that rate. InvalidArgument also when workers < 1.
Status ValidateInjections(const std::vector<Injection>& injections, int workers);

// Delays with a peer are on pipeline links: the job has `stages` > 1 and the two workers
// are neighbouring stages of one replica (worker = replica * stages + stage). The error
// names the spec: `--inject "worker=1,delay=50ms,peer=3": peer: worker 3 is not a
// neighbouring stage of worker 1 (4 stages)`.
Status ValidateLinkDelays(const std::vector<Injection>& injections, int stages);

// STAR_LINK_DELAY for worker `w`: "PEER:SECONDS" per delay with a peer on one of its
// links, comma-separated; "" when it has none.
std::string LinkDelayEnv(const std::vector<Injection>& injections, int w);

// "12s", "500ms", "2m", "1h", "1.5s", "0s" -> seconds (finite, >= 0). A bare number is an
// error ("needs a unit: s, ms, m or h; got \"12\""), as are negative values and other units.
StatusOr<double> ParseDuration(std::string_view text);

// Rates like tc's: "20mbit", "500kbit", "1gbit", "8000bit", "100bps" (bytes/s), "2mbps"
// (megabytes/s), "1.5mbit"; units bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, gbps, tbps
// (any case; k/m/g/t are powers of 1000, tc's convention) -> bits per second, rounded to
// the nearest bit, in [0, 1e15]. Bare numbers need a unit.
StatusOr<int64_t> ParseRate(std::string_view text);

// CPU quantities like Kubernetes': "500m", "1", "1.5", "0.25" -> millicores, rounded to the
// nearest millicore; the result must be > 0 (and at most 1e12).
StatusOr<int64_t> ParseCpuQuantity(std::string_view text);

}  // namespace star::local
