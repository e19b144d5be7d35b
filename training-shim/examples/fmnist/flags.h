// star-fmnist's command line (every flag documented in --help; most can also come from
// the STAR_* environment variable named there).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "star/shim/sync_engine.h"
#include "star/shim/torch_data.h"
#include "star/shim/worker_config.h"

namespace star::fmnist {

struct Flags {
  int epochs = 3;                  // stop after this many passes over the shard
  int64_t batch = 64;              // local batch per iteration
  bool batch_given = false;        // --batch was on the command line
  // The job's global batch (spec.training.globalBatchSize, STAR_GLOBAL_BATCH); 0: none.
  // Without --batch this worker's batch is its equal share of it; with one, they must agree.
  int64_t global_batch = 0;
  std::string amp_dtype = "bfloat16";  // STAR_AMP_DTYPE: the dtype of --amp (bfloat16 only)
  double lr = 0.02;                // SGD learning rate (per mean gradient)
  double momentum = 0.9;           // SGD momentum
  std::string amp = "off";         // on | off | auto (auto: on when the CPU has native bf16)
  int threads = 2;                 // LibTorch intra-op threads
  int64_t max_iterations = 0;      // 0: no limit
  double target_accuracy = 0;      // 0: none; else stop once a test evaluation reaches it
  uint64_t seed = 1;               // model init and shuffling
  std::string data_dir = shim::kFashionMnistDefaultDir;
  int64_t log_every = 100;         // progress line every N iterations
  int64_t eval_every = 0;          // 0: evaluate at epoch ends only
  int rank = 0;                    // this worker (for sharding)
  int world = 1;                   // number of workers
  int servers = 0;                 // parameter servers (0: all-reduce job)
  std::string timing_csv;          // if set: iteration,compute_seconds,exchange_seconds,batch,amp
  std::string store;               // rendezvous store URL (required when world > 1)
  bool host_store = false;         // this process serves the store at --store's host:port
  std::string listen_host = "127.0.0.1";  // address peers reach this worker at (Gloo)
  std::string job = "fmnist";      // job name: store key prefix, reports, metrics label
  std::string controller;          // controller base URL for reports ("" = no reports)
  std::string report_ca;           // STAR_REPORT_CA: PEM text or file ("" = system CAs)
  std::string token;               // bearer token for the report endpoint
  int64_t report_every = 10;       // iterations per WorkerReport
  double report_seconds = 0;       // ... or this many seconds, whichever first (0 = off)
  std::string metrics;             // host:port of the Prometheus endpoint ("" = off)
  int64_t timeout_ms = 60000;      // bound on every rendezvous and collective wait
  double clock_origin = -1;        // monotonic-clock seconds report times count from (-1: start)
  std::string snapshot_dir;        // worker 0 writes parameter snapshots here ("" = none)
  int64_t snapshot_every = 20;     // iterations per snapshot
  std::string evaluate_dir;        // evaluator role: evaluate the snapshots in this directory
  int64_t eval_samples = 0;        // test samples per evaluation (0: the whole test set)
  bool no_eval = false;            // never evaluate in the training loop (an evaluator does)
  // A pipeline-parallel job (pipeline.h): stages per replica (1: data-parallel only),
  // micro-batches per iteration (0: as many as stages), the most micro-batches a stage
  // holds (0: all), warm-up depths per stage ("" = plain 1F1B), the MLP's width.
  int stages = 1;
  int micro_batches = 0;
  int max_in_flight = 0;
  std::string warmup;
  std::string link_delay;  // "PEER:SECONDS,..." (STAR_LINK_DELAY), a neighbour's link delay
  int hidden = 1024;
};

// Parses argv into *flags. Returns the exit status when the program should stop now
// (--help: 0; a bad flag: CLI11's code, after printing the error); nullopt to run.
std::optional<int> ParseFlags(int argc, char** argv, Flags* flags);

// Settles flags->batch against flags->global_batch (ParseFlags calls it): with no global
// batch, nothing; without --batch, this worker's share of it (the equal split star local
// and the operator use: EqualBatches); with --batch, InvalidArgument naming both when it
// is not that share. Parameter servers (rank < servers) train nothing and are not checked.
[[nodiscard]] Status ResolveBatch(Flags* flags);

// The optimizer --lr and --momentum ask for.
shim::SgdOptions SgdOptionsOf(const Flags& flags);

// The shim's view of this process: rank, world, store, controller, metrics, timeouts.
shim::WorkerConfig WorkerConfigOf(const Flags& flags);

}  // namespace star::fmnist
