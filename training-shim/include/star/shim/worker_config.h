// WorkerConfig: how one training process takes part in a STAR job, as the operator and
// `star local` describe it in the STAR_* environment. WorkerSession and Synchronizer are
// configured from it; a trainer with command-line flags fills it from those instead.
//
// Environment (WorkerConfigFromEnvironment):
//   STAR_RANK               rank       required, or torchrun's RANK; this process's rank,
//                                      servers first
//   STAR_WORLD_SIZE         world_size required, or torchrun's WORLD_SIZE; number of workers
//   (STAR_* win where both are set. A rank from RANK other than 0 never hosts the store:
//   the processes a launcher starts in one pod share the pod's STAR_HOST_STORE.)
//   STAR_PARAMETER_SERVERS  parameter_servers
//   STAR_JOB                job
//   STAR_STORE_URL          store_url
//   STAR_HOST_STORE         host_store (1/0/true/false)
//   STAR_LISTEN_HOST        listen_host
//   STAR_CONTROLLER_URL     controller_url
//   STAR_JOB_TOKEN          token
//   STAR_REPORT_CA          report_ca_data when the value is PEM text (starts with
//                           "-----BEGIN"), else report_ca_file (a path to a PEM file);
//                           the CA the report endpoint's https certificate must verify
//                           against; unset or "" = the system's CAs
//   STAR_REPORT_EVERY       report_every
//   STAR_REPORT_SECONDS     report_seconds
//   STAR_METRICS_ADDRESS    metrics_address
//   STAR_NODE_NAME          node (the operator sets it from the pod's spec.nodeName)
//   STAR_TIMEOUT_MS         timeout
//   STAR_CLOCK_ORIGIN       clock_origin (a negative value means absent)
//   STAR_BACKEND            backend ("gloo" or "nccl")
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "star/core/status.h"

namespace star::shim {

struct WorkerConfig {
  std::string job = "star";     // job name: store key prefix, reports, metrics label
  int rank = 0;                 // this process's rank, parameter servers first; >= 0
  int world_size = 1;           // number of workers (servers not counted); >= 1
  int parameter_servers = 0;    // 0 = an all-reduce job; >= 0
  std::string store_url;        // rendezvous store "http://HOST:PORT"; "" = none (one worker alone)
  bool host_store = false;      // this process serves the store at store_url's HOST:PORT
  std::string listen_host = "127.0.0.1";  // address peers reach this process at
  std::string controller_url;   // base URL of the report endpoint; "" = send no reports
  std::string token;            // bearer token for the report endpoint and the store; "" = none
  // The CA an https controller_url's certificate must verify against: a PEM file, or PEM
  // text (the file wins). Default "" (both) = the system's CAs.
  std::string report_ca_file{};
  std::string report_ca_data{};
  int64_t report_every = 10;    // iterations per WorkerReport; >= 1
  // A report also goes out once the iterations pending since the last one took at least
  // this many seconds, whichever comes first (slow iterations report more often, so a
  // straggler shows sooner). >= 0; default 0: by iterations only. The operator sets 1.
  double report_seconds = 0;
  std::string metrics_address;  // HOST:PORT of the Prometheus endpoint; "" = none
  std::string node;             // the node this process runs on (metrics label); "" = unknown
  std::chrono::milliseconds timeout{60000};  // bound on every rendezvous and collective wait
  std::optional<double> clock_origin;  // monotonic seconds report times count from; absent = start
  // What moves the bulk of the data: "gloo" (TCP, host memory; the default) or "nccl" (the
  // current CUDA device: all-reduces and broadcasts staged through its memory, messages
  // over Gloo; staged_collective.h). "nccl" needs a build with CUDA and a device.
  std::string backend = "gloo";

  // Total ranks in the job's communicator: servers and workers.
  int ranks() const { return parameter_servers + world_size; }
  // Whether this process is a parameter server (rank < parameter_servers).
  bool is_server() const { return rank < parameter_servers; }
  // This worker's index among the workers (rank - parameter_servers).
  int worker() const { return rank - parameter_servers; }
};

// OK, or InvalidArgument naming the first bad field ("rank: must be < parameter_servers
// + world_size (3), got 4").
[[nodiscard]] Status Validate(const WorkerConfig& config);

// Sets config's report CA from a STAR_REPORT_CA value (for trainers that take it from a
// flag): PEM text (starts with "-----BEGIN") -> report_ca_data, anything else is a PEM
// file's path -> report_ca_file; "" changes nothing. InvalidArgument naming
// STAR_REPORT_CA when the text is not a PEM CA bundle or the file cannot be read or is
// not one.
[[nodiscard]] Status SetReportCa(const std::string& value, WorkerConfig* config);

// Returns the value of an environment variable, or nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (std::getenv).
EnvLookup ProcessEnvironment();

// Reads the STAR_* variables above over the defaults in `base`, then validates. Errors:
// InvalidArgument naming the variable when a required one is missing ("STAR_RANK (or
// torchrun's RANK): not set") or a value does not parse ("STAR_REPORT_EVERY: not an integer: \"x\"";
// STAR_REPORT_CA that is neither a PEM CA bundle nor a readable file of one), or
// Validate's error. Thread-safe if `env` is.
[[nodiscard]] StatusOr<WorkerConfig> WorkerConfigFromEnvironment(
    const EnvLookup& env = ProcessEnvironment(), WorkerConfig base = {});

}  // namespace star::shim
