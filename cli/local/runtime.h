// The local runtime: runs one TrainingJob on this machine (`star local`).
//
// What it starts, inside one Sandbox (sandbox.h):
//   * the parameter servers (ParameterServer jobs) and the workers, one process each
//     (the manifest's container command, or the bundled Fashion-MNIST trainer), each in
//     its own slot cgroup whose CPU quota is the manifest's CPU limit, and, when network
//     namespaces are available, in its own namespace behind a veth pair;
//   * for the bundled trainer, an evaluator process that tests the parameter snapshots
//     worker 0 writes (so test evaluation costs no worker any iteration time, whatever
//     the sync mode); its accuracies go to the control loop. The manifest's own command
//     reports its accuracies itself, with its WorkerReports (star.torch.report_accuracy,
//     WorkerSession::ReportAccuracy). The loop is the one source of the accuracy curve,
//     the final accuracy and the time to accuracy;
//   * in this process: the rendezvous store, the report endpoint and the job control
//     loop (operator/control_loop.h), the same loop the operator runs on Kubernetes.
//
// Injections (inject_spec.h) are applied and lifted at their times through the node
// agent's NodeOs: cpu=F sets the slot's quota to F of its capacity; neighbor=N starts N
// busy threads in a "neighbor" cgroup inside the slot weighted N:1 against the worker
// (a co-located job sharing the worker's CPU allocation); bandwidth=RATE shapes both
// directions of the slot's host-side veth (HTB + IFB); delay=D adds netem delay to the
// slot's egress.
//
// Resource reallocation (policy auto, spec.mitigation.resourceReallocation.enabled):
// by the operator's rule, each time the loop's resource request (resource_needs.h)
// changes. A worker listed with a compute need whose slot holds an injected neighbor gets
// CPU from it as resources::PlanReallocation (core) plans it, never below the neighbor's
// declared guarantee (nor 100 millicores), when that is worth it; the neighbor's cgroup
// is capped there, and uncapped again when the worker leaves the request
// (reallocation.h).
//
// The run ends when the loop first sees test accuracy >= the target (tta; from the
// evaluator or the workers' reports), when the workers finish spec.training.maxIterations (or the default budget), on a worker
// failure, on timeout, or when `stop` is set (Ctrl-C). Every process, cgroup and
// namespace is removed on every path.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "local/inject_spec.h"
#include "local/manifest.h"
#include "star/core/api/training_job.h"
#include "star/core/status.h"

namespace star::local {

// --policy: what STAR may do. auto = everything the manifest enables; ssgd, asgd, fixed-k,
// groups = that sync policy alone; amp = SSGD + Korel's AMP alone; boa = SSGD + BOA's
// batch adaptation alone.
enum class Policy { kAuto, kSsgd, kAsgd, kFixedK, kGroups, kAmp, kBoa };
std::string_view ToString(Policy p);  // "auto", "ssgd", "asgd", "fixed-k", "groups", "amp", "boa"
// InvalidArgument "--policy: must be one of auto, ssgd, asgd, fixed-k, groups, amp, boa; got \"x\"".
StatusOr<Policy> ParsePolicy(std::string_view text);

// The spec the job runs with under `policy`: the policy's sync policy and mitigations
// (auto keeps the manifest's mitigation switches and sets policy Auto). asgd on an
// AllReduce job makes it a ParameterServer job with one server (ASGD needs one).
api::TrainingJobSpec ApplyPolicy(api::TrainingJobSpec spec, Policy policy);
// The policy a manifest asks for when --policy is not given ("auto" for Auto, ...).
Policy PolicyOf(const api::TrainingJobSpec& spec);

struct RunOptions {
  LocalJob job;                       // from LoadManifest
  std::optional<Policy> policy;       // nullopt: the manifest's own settings
  std::vector<Injection> injections;  // validated against the job's worker count by Run
  // The bundled trainer (star-fmnist) and the neighbor's busy-loop command (argv prefix;
  // Run appends "--threads N --seconds S").
  std::string trainer_binary;
  std::vector<std::string> busy_command;
  // The bwneighbor's sink and sender command (argv prefix; Run appends "--listen PORT" or
  // "--to ADDRESS:PORT", and "--seconds S").
  std::vector<std::string> blast_command;
  // Put first on the workers' PYTHONPATH (before an inherited one): where the star Python
  // package is, for a manifest's own command that imports star.torch. "" = nothing added.
  std::string python_path;
  double timeout_seconds = 1800;    // whole run, > 0
  bool network = true;              // per-worker network namespaces when available
  int64_t report_every = 2;         // iterations per WorkerReport, >= 1
  // ... or once this many seconds passed since the last report, whichever first: a
  // straggler's slow iterations each report (STAR_REPORT_SECONDS). >= 0; 0 = off.
  double report_seconds = 0.5;
  int64_t snapshot_every = 20;      // iterations per parameter snapshot, >= 1
  int64_t eval_samples = 2000;      // test samples per evaluation (0: all 10000)
  int64_t eval_millicores = 300;    // the evaluator's CPU quota, >= 10
  int trainer_threads = 1;          // LibTorch threads per worker process, >= 1
  int64_t default_epochs = 20;      // iteration budget when maxIterations is unset
  // The learned selector's model file, loaded when the job runs with selector ML and
  // policy Auto ("" = none). Without a usable model the job uses the heuristic: a notice
  // and a selector_fallback entry on the timeline say why.
  std::string selector_model;
  std::string log_dir;              // worker logs; "" = a temporary directory (removed on success)
  // Live progress: called about once a second with one line (no newline).
  std::function<void(const std::string&)> progress;
  // Notes for the user (warnings, unavailable injections, where logs are).
  std::function<void(const std::string&)> notice;
  const std::atomic<bool>* stop = nullptr;  // set (e.g. by SIGINT) to end the run
};

struct RunResult {
  // The report (always present, partial when the run failed): policy, tta_seconds (null
  // if not reached), target_accuracy, final_accuracy (null before any accuracy, the
  // evaluator's or the workers' reports'),
  // iterations, wall_seconds, workers, timeline[] of {t, event, worker, detail},
  // accuracy_curve[] of [t, accuracy], plus job, architecture, outcome
  // ("target_reached" | "max_iterations" | "failed" | "interrupted" | "timeout"),
  // injections[], unavailable_injections[], samples[] (every WorkerReport: t, worker,
  // iteration, compute/communication/wait seconds, batch, amp), decisions, stragglers
  // (workers ever flagged), final_mode.
  nlohmann::json report;
  // OK when the run completed (target reached or budget done); Aborted when interrupted;
  // DeadlineExceeded on timeout; the failure otherwise (names the worker and the tail
  // of its log).
  Status status;
};

// Runs the job to its end. Errors before anything starts (bad options, injections that
// do not fit the job) come back in `status` with an empty report and nothing changed.
RunResult RunLocalJob(const RunOptions& options);

}  // namespace star::local
