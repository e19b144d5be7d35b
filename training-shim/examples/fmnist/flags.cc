#include "flags.h"

#include <chrono>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "star/core/batch/baseline.h"

namespace star::fmnist {

namespace {

// How this process trains: model, data, optimizer, evaluation, logging.
void AddTrainingFlags(CLI::App& app, Flags* flags) {
  app.add_option("--epochs", flags->epochs, "passes over this worker's shard")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch", flags->batch, "local batch size")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--lr", flags->lr, "SGD learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--momentum", flags->momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--global-batch", flags->global_batch,
                 "the job's global batch: --batch defaults to this worker's share, and must agree (0: none)")
      ->envname("STAR_GLOBAL_BATCH")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--amp", flags->amp, "mixed precision: on, off or auto")
      ->check(CLI::IsMember({"on", "off", "auto"}))->capture_default_str();
  app.add_option("--amp-dtype", flags->amp_dtype,
                 "the mixed-precision type: bfloat16 (float16 needs a loss scale all workers agree on)")
      ->envname("STAR_AMP_DTYPE")->check(CLI::IsMember({"bfloat16"}))->capture_default_str();
  app.add_option("--threads", flags->threads, "LibTorch threads (the operator sets OMP_NUM_THREADS from the CPU limit)")
      ->envname("OMP_NUM_THREADS")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-iterations", flags->max_iterations, "stop after N iterations (0: no limit)")
      ->envname("STAR_MAX_ITERATIONS")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--target-accuracy", flags->target_accuracy, "stop when test accuracy reaches it (0: off)")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--seed", flags->seed, "random seed")->capture_default_str();
  app.add_option("--data-dir", flags->data_dir, "directory of the Fashion-MNIST IDX .gz files")
      ->capture_default_str();
  app.add_option("--log-every", flags->log_every, "progress line every N iterations (0: none)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--eval-every", flags->eval_every, "test evaluation every N iterations (0: epoch ends)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
}

// Its place in the job: rank, peers, controller, metrics, snapshots, evaluator role.
void AddJobFlags(CLI::App& app, Flags* flags) {
  app.add_option("--rank", flags->rank, "this process's rank (parameter servers first)")->envname("STAR_RANK")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--world", flags->world, "number of workers")->envname("STAR_WORLD_SIZE")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--servers", flags->servers, "parameter servers (0: all-reduce); ranks below it serve")
      ->envname("STAR_PARAMETER_SERVERS")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--timing-csv", flags->timing_csv, "write per-iteration timings to this CSV file");
  app.add_option("--store", flags->store, "rendezvous store URL, http://HOST:PORT")
      ->envname("STAR_STORE_URL");
  app.add_flag("--host-store", flags->host_store, "serve the store at --store's HOST:PORT")
      ->envname("STAR_HOST_STORE");
  app.add_option("--listen-host", flags->listen_host, "address peers reach this worker at")
      ->envname("STAR_LISTEN_HOST")->capture_default_str();
  app.add_option("--job", flags->job, "job name (store prefix, reports, metrics)")
      ->envname("STAR_JOB")->capture_default_str();
  app.add_option("--controller", flags->controller, "controller base URL for WorkerReports")
      ->envname("STAR_CONTROLLER_URL");
  app.add_option("--token", flags->token, "the job's bearer token: reports, and the rendezvous store")
      ->envname("STAR_JOB_TOKEN");
  app.add_option("--report-ca", flags->report_ca,
                 "CA (PEM text, or a PEM file) an https controller is verified with (default: the system's)")
      ->envname("STAR_REPORT_CA")
      ->check(CLI::Validator(
          [](std::string& value) {
            shim::WorkerConfig probe;
            const Status s = shim::SetReportCa(value, &probe);
            return s.ok() ? std::string() : s.message();
          },
          "PEM"));
  app.add_option("--report-every", flags->report_every, "iterations per WorkerReport")
      ->envname("STAR_REPORT_EVERY")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--report-seconds", flags->report_seconds,
                 "also report once this many seconds passed since the last report (0 = off)")
      ->envname("STAR_REPORT_SECONDS")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--metrics", flags->metrics, "HOST:PORT of the Prometheus endpoint (off if empty)")
      ->envname("STAR_METRICS_ADDRESS");
  app.add_option("--timeout-ms", flags->timeout_ms, "bound on every rendezvous and collective wait")
      ->envname("STAR_TIMEOUT_MS")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--clock-origin", flags->clock_origin,
                 "monotonic-clock seconds that report and snapshot times count from (-1: start)")
      ->envname("STAR_CLOCK_ORIGIN");
  app.add_option("--snapshot-dir", flags->snapshot_dir, "worker 0 writes parameter snapshots here")
      ->envname("STAR_SNAPSHOT_DIR");
  app.add_option("--snapshot-every", flags->snapshot_every, "iterations per snapshot")
      ->envname("STAR_SNAPSHOT_EVERY")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--evaluate", flags->evaluate_dir,
                 "evaluator role: evaluate the snapshots appearing in this directory");
  app.add_option("--eval-samples", flags->eval_samples, "test samples per evaluation (0: all)")
      ->envname("STAR_EVAL_SAMPLES")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_flag("--no-eval", flags->no_eval, "never evaluate in the training loop")
      ->envname("STAR_NO_EVAL");
}

// A pipeline's shape: the operator's and star local's STAR_PIPELINE_* variables.
void AddPipelineFlags(CLI::App& app, Flags* flags) {
  app.add_option("--stages", flags->stages, "pipeline stages per replica (1: data-parallel)")
      ->envname("STAR_PIPELINE_STAGES")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--micro-batches", flags->micro_batches, "micro-batches per iteration (0: --stages)")
      ->envname("STAR_MICRO_BATCHES")->check(CLI::Range(0, 1024))->capture_default_str();
  app.add_option("--max-in-flight", flags->max_in_flight, "most micro-batches a stage holds (0: all)")
      ->envname("STAR_MAX_IN_FLIGHT")->check(CLI::Range(0, 1024))->capture_default_str();
  app.add_option("--warmup", flags->warmup, "warm-up depth per stage, comma-separated (default: 1F1B)")
      ->envname("STAR_PIPELINE_WARMUP");
  app.add_option("--link-delay", flags->link_delay,
                 "added delay of this stage's messages to a neighbour, PEER:SECONDS comma-separated "
                 "(star local --inject worker=W,delay=D,peer=P)")
      ->envname("STAR_LINK_DELAY");
  app.add_option("--hidden", flags->hidden, "the pipeline MLP's hidden width")
      ->envname("STAR_FMNIST_HIDDEN")->check(CLI::Range(1, 1 << 16))->capture_default_str();
}

}  // namespace

std::optional<int> ParseFlags(int argc, char** argv, Flags* flags) {
  CLI::App app{"star-fmnist: Fashion-MNIST training worker"};
  AddTrainingFlags(app, flags);
  AddJobFlags(app, flags);
  AddPipelineFlags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  flags->batch_given = app.count("--batch") > 0;
  if (Status s = ResolveBatch(flags); !s.ok()) {
    std::cerr << "star-fmnist: " << s.message() << "\n";
    return 2;
  }
  return std::nullopt;
}

Status ResolveBatch(Flags* flags) {
  const int worker = flags->rank - flags->servers;
  if (flags->global_batch <= 0 || worker < 0 || worker >= flags->world) return Status::Ok();
  // A pipeline's stages share their replica's batch: the split is over replicas.
  const int stages = flags->stages > 1 && flags->world % flags->stages == 0 ? flags->stages : 1;
  const int64_t share =
      batch::EqualBatches(flags->global_batch, flags->world / stages)[static_cast<size_t>(worker / stages)];
  if (share < 1) {
    return Status::InvalidArgument("spec.training.globalBatchSize " + std::to_string(flags->global_batch) +
                                   " (STAR_GLOBAL_BATCH) leaves worker " + std::to_string(worker) + " of " +
                                   std::to_string(flags->world) + " no samples");
  }
  if (!flags->batch_given) {
    flags->batch = share;
    return Status::Ok();
  }
  if (flags->batch != share) {
    return Status::InvalidArgument(
        "the trainer's --batch " + std::to_string(flags->batch) + " disagrees with spec.training.globalBatchSize " +
        std::to_string(flags->global_batch) + " (STAR_GLOBAL_BATCH), whose share for worker " +
        std::to_string(worker) + " of " + std::to_string(flags->world) + " is " + std::to_string(share));
  }
  return Status::Ok();
}

shim::SgdOptions SgdOptionsOf(const Flags& f) {
  return {static_cast<float>(f.lr), static_cast<float>(f.momentum), 0.0f};
}

shim::WorkerConfig WorkerConfigOf(const Flags& flags) {
  shim::WorkerConfig c;
  c.job = flags.job;
  c.rank = flags.rank;
  c.world_size = flags.world;
  c.parameter_servers = flags.servers;
  c.store_url = flags.store;
  c.host_store = flags.host_store;
  c.listen_host = flags.listen_host;
  c.controller_url = flags.controller;
  c.token = flags.token;
  (void)shim::SetReportCa(flags.report_ca, &c);  // checked when the flag was parsed
  c.report_every = flags.report_every;
  c.report_seconds = flags.report_seconds;
  c.metrics_address = flags.metrics;
  c.timeout = std::chrono::milliseconds(flags.timeout_ms);
  if (flags.clock_origin >= 0) c.clock_origin = flags.clock_origin;
  return c;
}

}  // namespace star::fmnist
