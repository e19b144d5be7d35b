// star-fmnist: trains the Fashion-MNIST CNN; one process per worker, through the shim.
//
// Workers meet through the rendezvous store (--store, hosted by the rank started with
// --host-store, or by the controller) and synchronise with the sync engine over Gloo.
// Every --report-every iterations a worker sends a WorkerReport to the controller
// (--controller) and applies the Decision it gets back: the sync mode (all workers at
// the same iteration), and its own AMP and local batch. --metrics serves star_worker_*.
// A single worker (--world 1, no --store) trains alone through the same engine.
// With --servers P the job is a parameter-server job: ranks 0..P-1 serve the parameters
// (sharded largest-first) and ranks P..P+world-1 are the workers.
// Every flag can also come from the environment variable named in --help (STAR_*),
// which is how the operator and `star local` configure workers.
//
// With --snapshot-dir, worker 0 writes its parameters every --snapshot-every iterations
// (snap-<iteration>.bin, written to a temporary name and renamed), and a separate process
// started with --evaluate DIR evaluates each snapshot in order and prints one JSON line
// per snapshot: {"iteration":I,"time_seconds":T,"accuracy":A} (T on the job clock of
// --clock-origin). That keeps evaluation off the workers' iterations (how `star local`
// measures time to accuracy the same way for every sync mode).
//
// stdout: progress lines, then one final JSON line
//   {"final_accuracy":A,"seconds":S,"iterations":I,...}
// Errors go to stderr with exit status 1; a bad flag exits with CLI11's code.
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <span>
#include <type_traits>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include "star/shim/gloo_collective.h"
#include "star/shim/local_collective.h"
#include "star/shim/parameter_server.h"
#include "star/report/client.h"
#include "star/shim/store_server.h"
#include "star/shim/sync_engine.h"
#include "star/shim/timing.h"
#include "star/shim/torch_amp.h"
#include "star/shim/worker_metrics.h"
#include "star/shim/torch_data.h"
#include "star/shim/torch_model.h"
#include "star/shim/torch_train.h"

namespace {

using star::Status;
using star::StatusOr;
using namespace star::shim;
using Clock = std::chrono::steady_clock;

struct Flags {
  int epochs = 3;                  // stop after this many passes over the shard
  int64_t batch = 64;              // local batch per iteration
  double lr = 0.02;                // SGD learning rate (per mean gradient)
  double momentum = 0.9;           // SGD momentum
  std::string amp = "off";         // on | off | auto (auto: on when the CPU has native bf16)
  int threads = 2;                 // LibTorch intra-op threads
  int64_t max_iterations = 0;      // 0: no limit
  double target_accuracy = 0;      // 0: none; else stop once a test evaluation reaches it
  uint64_t seed = 1;               // model init and shuffling
  std::string data_dir = kFashionMnistDefaultDir;
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
  std::string token;               // bearer token for the report endpoint
  int64_t report_every = 10;       // iterations per WorkerReport
  std::string metrics;             // host:port of the Prometheus endpoint ("" = off)
  int64_t timeout_ms = 60000;      // bound on every rendezvous and collective wait
  double clock_origin = -1;        // monotonic-clock seconds report times count from (-1: start)
  std::string snapshot_dir;        // worker 0 writes parameter snapshots here ("" = none)
  int64_t snapshot_every = 20;     // iterations per snapshot
  std::string evaluate_dir;        // evaluator role: evaluate the snapshots in this directory
  int64_t eval_samples = 0;        // test samples per evaluation (0: the whole test set)
  bool no_eval = false;            // never evaluate in the training loop (an evaluator does)
};

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The communicator over all workers: Gloo through the store, or a lone local rank.
StatusOr<std::unique_ptr<Collective>> ConnectWorld(const Flags& flags,
                                                   std::unique_ptr<StoreServer>* server) {
  const std::chrono::milliseconds timeout(flags.timeout_ms);
  if (flags.world == 1 && flags.servers == 0 && flags.store.empty()) {
    return std::move(NewLocalGroup(1, timeout)[0]);
  }
  if (flags.store.empty()) {
    return Status::InvalidArgument("--store: required when --world > 1 or --servers > 0");
  }
  if (flags.host_store) {
    // --store is http://HOST:PORT
    const std::string url = flags.store;
    const auto scheme = url.find("://");
    const auto colon = url.rfind(':');
    if (scheme == std::string::npos || colon == std::string::npos || colon < scheme + 3) {
      return Status::InvalidArgument("--store: must be http://HOST:PORT to host it, got \"" +
                                     url + "\"");
    }
    int port = 0;
    try {
      port = std::stoi(url.substr(colon + 1));
    } catch (const std::exception&) {
      return Status::InvalidArgument("--store: bad port in \"" + url + "\"");
    }
    auto started = StoreServer::Start(url.substr(scheme + 3, colon - scheme - 3), port);
    if (!started.ok()) return started.status();
    *server = std::move(*started);
  }
  auto store = ConnectStore(flags.store, StoreOptions{timeout});
  if (!store.ok()) return store.status();
  GlooOptions gloo;
  gloo.hostname = flags.listen_host;
  gloo.prefix = flags.job;
  gloo.timeout = timeout;
  return ConnectGloo(*store, flags.rank, flags.servers + flags.world, gloo);
}

// One worker's view of synchronisation, whichever architecture the job has.
class Synchronizer {
 public:
  virtual ~Synchronizer() = default;
  virtual StatusOr<StepStats> Step(std::span<const float> grad_sum, int64_t batch) = 0;
  virtual Status Schedule(const star::api::Decision& d) = 0;
  virtual std::span<const float> params() const = 0;
  virtual int64_t iteration() const = 0;
  virtual Status Finish() = 0;
};

template <typename Engine>
class SynchronizerOf : public Synchronizer {
 public:
  explicit SynchronizerOf(std::unique_ptr<Engine> e) : e_(std::move(e)) {}
  StatusOr<StepStats> Step(std::span<const float> g, int64_t b) override { return e_->Step(g, b); }
  Status Schedule(const star::api::Decision& d) override { return e_->Schedule(d); }
  std::span<const float> params() const override { return e_->params(); }
  int64_t iteration() const override { return e_->iteration(); }
  Status Finish() override {
    if constexpr (std::is_same_v<Engine, PsWorker>) return e_->Finish();
    return Status::Ok();
  }

 private:
  std::unique_ptr<Engine> e_;
};

std::vector<size_t> TensorSizes(const FashionCnn& model) {
  std::vector<size_t> sizes;
  for (const auto& p : model->parameters()) sizes.push_back(static_cast<size_t>(p.numel()));
  return sizes;
}

// A parameter snapshot: "STARSNP1", int64 iteration, double time_seconds, int64 count,
// then count float32 parameters (host byte order: written and read on one machine).
constexpr char kSnapshotMagic[8] = {'S', 'T', 'A', 'R', 'S', 'N', 'P', '1'};

Status WriteSnapshot(const std::string& dir, int64_t iteration, double time_seconds,
                     std::span<const float> params) {
  char name[64];
  std::snprintf(name, sizeof(name), "snap-%012lld.bin", static_cast<long long>(iteration));
  const std::string path = dir + "/" + name;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const auto count = static_cast<int64_t>(params.size());
    out.write(kSnapshotMagic, sizeof(kSnapshotMagic));
    out.write(reinterpret_cast<const char*>(&iteration), sizeof(iteration));
    out.write(reinterpret_cast<const char*>(&time_seconds), sizeof(time_seconds));
    out.write(reinterpret_cast<const char*>(&count), sizeof(count));
    out.write(reinterpret_cast<const char*>(params.data()),
              static_cast<std::streamsize>(params.size_bytes()));
    if (!out) return Status::Unavailable("--snapshot-dir: cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::Unavailable("--snapshot-dir: cannot rename " + tmp + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

struct Snapshot {
  int64_t iteration = 0;
  double time_seconds = 0;
  std::vector<float> params;
};

StatusOr<Snapshot> ReadSnapshot(const std::string& path, size_t expected) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  Snapshot snap;
  int64_t count = 0;
  in.read(magic, sizeof(magic));
  in.read(reinterpret_cast<char*>(&snap.iteration), sizeof(snap.iteration));
  in.read(reinterpret_cast<char*>(&snap.time_seconds), sizeof(snap.time_seconds));
  in.read(reinterpret_cast<char*>(&count), sizeof(count));
  if (!in || std::memcmp(magic, kSnapshotMagic, sizeof(magic)) != 0 ||
      count != static_cast<int64_t>(expected)) {
    return Status::InvalidArgument(path + ": not a snapshot of this model");
  }
  snap.params.resize(expected);
  in.read(reinterpret_cast<char*>(snap.params.data()),
          static_cast<std::streamsize>(expected * sizeof(float)));
  if (!in) return Status::InvalidArgument(path + ": truncated snapshot");
  return snap;
}

// The evaluator role: evaluates every snapshot in --evaluate's directory in iteration
// order, printing one JSON line each and deleting it. Ends (0) once the file "done"
// exists there and no snapshot is left; fails (1) when no snapshot arrives for
// --timeout-ms.
int RunEvaluator(const Flags& flags) {
  auto fail = [](const Status& s) {
    std::cerr << "star-fmnist: evaluator: " << s << "\n";
    return 1;
  };
  torch::set_num_threads(flags.threads);
  auto test = LoadFashionMnist(flags.data_dir, FashionMnistSplit::kTest);
  if (!test.ok()) return fail(test.status());
  auto amp = AmpSwitch::Create(AmpOptions{}, CpuHasNativeBf16());
  if (!amp.ok()) return fail(amp.status());
  FashionCnn model;
  const auto n = static_cast<size_t>(ParameterCount(*model));
  const std::filesystem::path dir(flags.evaluate_dir);
  auto idle_since = Clock::now();
  while (true) {
    std::vector<std::filesystem::path> snaps;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with("snap-") && name.ends_with(".bin")) snaps.push_back(e.path());
    }
    if (ec) return fail(Status::Unavailable("--evaluate " + dir.string() + ": " + ec.message()));
    if (snaps.empty()) {
      if (std::filesystem::exists(dir / "done")) return 0;
      if (Seconds(idle_since) * 1000 > static_cast<double>(flags.timeout_ms)) {
        return fail(Status::DeadlineExceeded("no snapshot within --timeout-ms"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    std::sort(snaps.begin(), snaps.end());
    auto snap = ReadSnapshot(snaps.front().string(), n);
    if (!snap.ok()) return fail(snap.status());
    if (Status s = FlatToParameters(snap->params, *model); !s.ok()) return fail(s);
    StatusOr<double> acc = 0.0;
    {
      AmpSwitch::Scope scope(*amp);
      acc = Evaluate(model, *test, flags.eval_samples > 0 ? flags.eval_samples : -1);
    }
    if (!acc.ok()) return fail(acc.status());
    nlohmann::json line = {{"iteration", snap->iteration},
                           {"time_seconds", snap->time_seconds},
                           {"accuracy", *acc}};
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
    std::filesystem::remove(snaps.front(), ec);
    idle_since = Clock::now();
  }
}

int Run(const Flags& flags) {
  if (!flags.evaluate_dir.empty()) return RunEvaluator(flags);
  torch::set_num_threads(flags.threads);
  torch::manual_seed(flags.seed);
  auto fail = [](const Status& s) {
    std::cerr << "star-fmnist: " << s << "\n";
    return 1;
  };

  if (flags.rank >= flags.servers + flags.world) {
    return fail(Status::InvalidArgument("--rank: must be < --servers + --world (" +
                                        std::to_string(flags.servers + flags.world) + "), got " +
                                        std::to_string(flags.rank)));
  }
  const SgdOptions sgd{static_cast<float>(flags.lr), static_cast<float>(flags.momentum), 0.0f};
  const PsOptions ps_options{std::chrono::milliseconds(flags.timeout_ms)};
  if (flags.rank < flags.servers) {  // a parameter server: serves until the workers finish
    FashionCnn model;
    std::vector<float> params(ParameterCount(*model));
    if (Status s = ParametersToFlat(*model, params); !s.ok()) return fail(s);
    std::unique_ptr<StoreServer> store_server;
    auto world = ConnectWorld(flags, &store_server);
    if (!world.ok()) return fail(world.status());
    auto server = ParameterServer::Create(std::move(*world), flags.servers, TensorSizes(model),
                                          params, sgd, ps_options);
    if (!server.ok()) return fail(server.status());
    std::printf("star-fmnist: parameter server %d of %d\n", flags.rank, flags.servers);
    std::fflush(stdout);
    if (Status s = (*server)->Run(); !s.ok()) return fail(s);
    const ServerStats& st = (*server)->stats();
    nlohmann::json out = {{"role", "server"},
                          {"updates", st.updates},
                          {"gradients_applied", st.gradients_applied},
                          {"late_gradients", st.late_gradients}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }

  auto train = LoadFashionMnist(flags.data_dir, FashionMnistSplit::kTrain);
  if (!train.ok()) return fail(train.status());
  auto test = LoadFashionMnist(flags.data_dir, FashionMnistSplit::kTest);
  if (!test.ok()) return fail(test.status());
  const int worker = flags.rank - flags.servers;  // this worker's index among the workers
  auto shard = ShardOf(train->size(), worker, flags.world);
  if (!shard.ok()) return fail(shard.status());
  auto batches = BatchIterator::Create(&*train, *shard, flags.seed + 7919ULL * worker);
  if (!batches.ok()) return fail(batches.status());

  bool amp_on = flags.amp == "on" || (flags.amp == "auto" && CpuHasNativeBf16());
  auto amp = AmpSwitch::Create(AmpOptions{}, amp_on);
  if (!amp.ok()) return fail(amp.status());

  FashionCnn model;
  const int64_t n = ParameterCount(*model);
  std::vector<float> params(n), grad_sum(n);
  if (Status s = ParametersToFlat(*model, params); !s.ok()) return fail(s);
  std::unique_ptr<StoreServer> store_server;
  auto world = ConnectWorld(flags, &store_server);
  if (!world.ok()) return fail(world.status());
  std::unique_ptr<Synchronizer> engine;
  if (flags.servers > 0) {
    auto ps = PsWorker::Create(std::move(*world), flags.servers, TensorSizes(model), ps_options);
    if (!ps.ok()) return fail(ps.status());
    engine = std::make_unique<SynchronizerOf<PsWorker>>(std::move(*ps));
  } else {
    auto ar = SyncEngine::Create(std::move(*world), params, sgd,
                                 EngineOptions{std::chrono::milliseconds(flags.timeout_ms)});
    if (!ar.ok()) return fail(ar.status());
    engine = std::make_unique<SynchronizerOf<SyncEngine>>(std::move(*ar));
  }
  if (Status s = FlatToParameters(engine->params(), *model); !s.ok()) return fail(s);

  std::unique_ptr<ReportClient> reports;
  if (!flags.controller.empty()) {
    auto client = ReportClient::Create(ReportClientOptions{flags.controller, flags.token,
                                                           std::chrono::milliseconds(5000)});
    if (!client.ok()) return fail(client.status());
    reports = std::move(*client);
  }
  std::unique_ptr<WorkerMetrics> metrics;
  if (!flags.metrics.empty()) {
    auto started = WorkerMetrics::Start(flags.metrics, flags.job, worker);
    if (!started.ok()) return fail(started.status());
    metrics = std::move(*started);
    std::printf("star-fmnist: metrics on port %d\n", metrics->port());
  }
  IterationTimerOptions timer_options;
  timer_options.job = flags.job;
  timer_options.worker = worker;
  if (flags.clock_origin >= 0) timer_options.origin_seconds = flags.clock_origin;
  const double origin = flags.clock_origin >= 0 ? flags.clock_origin : MonotonicSeconds();
  IterationTimer timer(timer_options);
  int64_t local_batch = flags.batch;
  std::optional<star::api::Decision> pending;  // applies its per-worker settings when due
  int64_t last_epoch = -1;                      // newest decision epoch scheduled

  std::printf("star-fmnist: %lld parameters, shard [%lld, %lld), batch %lld, amp %s, threads %d\n",
              static_cast<long long>(n), static_cast<long long>(shard->begin),
              static_cast<long long>(shard->end), static_cast<long long>(flags.batch),
              amp_on ? "on(bf16)" : "off", flags.threads);

  struct IterationTiming {
    double compute = 0, exchange = 0;
    int64_t batch = 0;
    bool amp = false;
  };
  std::vector<IterationTiming> timings;
  const auto start = Clock::now();
  auto window_start = start;
  int64_t window_samples = 0;
  double window_loss = 0;
  int64_t window_iters = 0;
  double accuracy = -1;
  bool reached = false;
  int64_t iteration = 0;
  int64_t epoch = 0;

  auto evaluate = [&](const char* when) -> Status {
    auto acc = Evaluate(model, *test);
    if (!acc.ok()) return acc.status();
    accuracy = *acc;
    std::printf("%s %lld iteration %lld test_accuracy %.4f elapsed_s %.1f\n", when,
                static_cast<long long>(epoch), static_cast<long long>(iteration), accuracy,
                Seconds(start));
    std::fflush(stdout);
    reached = flags.target_accuracy > 0 && accuracy >= flags.target_accuracy;
    return Status::Ok();
  };

  // Workers must stop at the same iteration (a peer that leaves early fails the others'
  // next exchange). With several workers, epochs become an iteration budget computed the
  // same way everywhere, and evaluations happen every eval_every iterations (default: one
  // budget epoch); with identical parameters (SSGD) every worker then sees the same
  // accuracy and stops at the same evaluation.
  int64_t max_iterations = flags.max_iterations;
  int64_t eval_every = flags.eval_every;
  const bool together = flags.world > 1;
  if (together) {
    const int64_t per_epoch = std::max<int64_t>(1, train->size() / flags.world / flags.batch);
    if (max_iterations <= 0) max_iterations = per_epoch * flags.epochs;
    if (eval_every <= 0) eval_every = per_epoch;
  }
  while (!reached && (together || epoch < flags.epochs) &&
         (max_iterations <= 0 || iteration < max_iterations)) {
    // The Decision's per-worker settings for this worker, once due.
    if (pending && iteration >= pending->apply_at_iteration) {
      for (const auto& w : pending->workers) {
        if (w.worker != worker) continue;
        amp->set_enabled(w.amp);
        local_batch = w.batch;
      }
      pending.reset();
    }
    auto batch = batches->Next(local_batch);
    if (!batch.ok()) return fail(batch.status());
    if (Status s = timer.BeginCompute(); !s.ok()) return fail(s);
    auto grad = ComputeGradientSum(model, *batch, *amp, grad_sum);
    if (!grad.ok()) return fail(grad.status());
    if (Status s = timer.EndCompute(); !s.ok()) return fail(s);

    auto exchange_start = Clock::now();
    if (Status s = timer.BeginCommunication(); !s.ok()) return fail(s);
    auto step = engine->Step(grad_sum, grad->batch);
    if (!step.ok()) return fail(step.status());
    if (Status s = timer.AddWait(step->wait_seconds); !s.ok()) return fail(s);
    if (Status s = timer.EndCommunication(); !s.ok()) return fail(s);
    if (Status s = FlatToParameters(engine->params(), *model); !s.ok()) return fail(s);
    timings.push_back({grad->compute_seconds, Seconds(exchange_start), grad->batch, amp->enabled()});
    iteration = engine->iteration();

    IterationInfo info;
    info.iteration = iteration;
    info.local_batch = static_cast<int>(grad->batch);
    info.amp = amp->enabled();
    info.loss = grad->mean_loss;
    const bool report_now = reports && timer.pending_iterations() + 1 >= flags.report_every;
    if (report_now && step->updated && step->update_batch > grad->batch) {
      // The noise-scale pair: this worker's mean gradient and the update's.
      const double b = static_cast<double>(grad->batch);
      info.local_grad_sq_norm = SquaredL2Norm(grad_sum) / (b * b);
      info.global_grad_sq_norm = step->update_grad_sq_norm;
    }
    auto sample = timer.EndIteration(info);
    if (!sample.ok()) return fail(sample.status());
    if (metrics) metrics->Observe(*sample);
    if (report_now) {
      auto report = timer.TakeReport();
      if (!report.ok()) return fail(report.status());
      auto decision = reports->Send(*report);
      if (!decision.ok()) {
        // The controller being away costs this report, not the training run.
        std::fprintf(stderr, "star-fmnist: report: %s\n", decision.status().ToString().c_str());
      } else if (decision->has_value() && (*decision)->epoch > last_epoch) {
        // The controller repeats its latest decision on every response: only a newer
        // epoch is news.
        if (Status s = engine->Schedule(**decision); !s.ok()) return fail(s);
        last_epoch = (*decision)->epoch;
        pending = **decision;
      }
    }

    window_samples += grad->batch;
    window_loss += grad->mean_loss;
    ++window_iters;
    if (flags.log_every > 0 && iteration % flags.log_every == 0) {
      double dt = Seconds(window_start);
      std::printf("iteration %lld epoch %lld loss %.4f compute_ms %.2f samples_per_s %.0f\n",
                  static_cast<long long>(iteration), static_cast<long long>(epoch),
                  window_loss / window_iters, 1e3 * grad->compute_seconds,
                  window_samples / std::max(dt, 1e-9));
      std::fflush(stdout);
      window_start = Clock::now();
      window_samples = 0;
      window_loss = 0;
      window_iters = 0;
    }
    if (!flags.snapshot_dir.empty() && worker == 0 && flags.snapshot_every > 0 &&
        iteration % flags.snapshot_every == 0) {
      if (Status s = WriteSnapshot(flags.snapshot_dir, iteration, MonotonicSeconds() - origin,
                                   engine->params());
          !s.ok()) {
        return fail(s);
      }
    }
    if (!flags.no_eval && eval_every > 0 && iteration % eval_every == 0) {
      if (Status s = evaluate("eval epoch"); !s.ok()) return fail(s);
    }
    // An epoch ends when this worker has seen its whole shard once more.
    if (!together && batches->samples_seen() >= (epoch + 1) * shard->size()) {
      ++epoch;
      if (flags.no_eval) continue;
      if (Status s = evaluate("end of epoch"); !s.ok()) return fail(s);
    }
  }
  if (Status s = engine->Finish(); !s.ok()) return fail(s);  // parameter servers stop
  if (!flags.no_eval && (accuracy < 0 || (max_iterations > 0 && iteration == max_iterations))) {
    if (Status s = evaluate("final epoch"); !s.ok()) return fail(s);
  }
  const double seconds = Seconds(start);

  // Mean and median compute time, skipping the first 10 iterations (allocator and kernel
  // warm-up); the median resists other processes sharing the CPU.
  std::vector<double> compute;
  for (size_t i = std::min<size_t>(10, timings.size() / 2); i < timings.size(); ++i) {
    compute.push_back(timings[i].compute);
  }
  double compute_sum = 0;
  for (double c : compute) compute_sum += c;
  const auto counted = static_cast<int64_t>(compute.size());
  double median = 0;
  if (!compute.empty()) {
    std::nth_element(compute.begin(), compute.begin() + counted / 2, compute.end());
    median = compute[counted / 2];
  }
  if (!flags.timing_csv.empty()) {
    std::ofstream csv(flags.timing_csv);
    csv << "iteration,compute_seconds,exchange_seconds,batch,amp\n";
    for (size_t i = 0; i < timings.size(); ++i) {
      csv << i << ',' << timings[i].compute << ',' << timings[i].exchange << ','
          << timings[i].batch << ',' << (timings[i].amp ? 1 : 0) << '\n';
    }
    if (!csv) return fail(Status::Unavailable("--timing-csv " + flags.timing_csv + ": write failed"));
  }
  nlohmann::json out = {{"final_accuracy", accuracy},
                        {"seconds", seconds},
                        {"iterations", iteration},
                        {"epochs", epoch},
                        {"target_reached", reached},
                        {"amp", amp_on},
                        {"batch", flags.batch},
                        {"mean_compute_ms", counted > 0 ? 1e3 * compute_sum / counted : 0.0},
                        {"median_compute_ms", 1e3 * median}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"star-fmnist: Fashion-MNIST training worker"};
  app.add_option("--epochs", flags.epochs, "passes over this worker's shard")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch", flags.batch, "local batch size")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--lr", flags.lr, "SGD learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--momentum", flags.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--amp", flags.amp, "mixed precision: on, off or auto")
      ->check(CLI::IsMember({"on", "off", "auto"}))->capture_default_str();
  app.add_option("--threads", flags.threads, "LibTorch threads")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-iterations", flags.max_iterations, "stop after N iterations (0: no limit)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--target-accuracy", flags.target_accuracy, "stop when test accuracy reaches it (0: off)")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--seed", flags.seed, "random seed")->capture_default_str();
  app.add_option("--data-dir", flags.data_dir, "directory of the Fashion-MNIST IDX .gz files")
      ->capture_default_str();
  app.add_option("--log-every", flags.log_every, "progress line every N iterations (0: none)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--eval-every", flags.eval_every, "test evaluation every N iterations (0: epoch ends)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--rank", flags.rank, "this process's rank (parameter servers first)")->envname("STAR_RANK")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--world", flags.world, "number of workers")->envname("STAR_WORLD_SIZE")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--servers", flags.servers, "parameter servers (0: all-reduce); ranks below it serve")
      ->envname("STAR_PARAMETER_SERVERS")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--timing-csv", flags.timing_csv, "write per-iteration timings to this CSV file");
  app.add_option("--store", flags.store, "rendezvous store URL, http://HOST:PORT")
      ->envname("STAR_STORE_URL");
  app.add_flag("--host-store", flags.host_store, "serve the store at --store's HOST:PORT")
      ->envname("STAR_HOST_STORE");
  app.add_option("--listen-host", flags.listen_host, "address peers reach this worker at")
      ->envname("STAR_LISTEN_HOST")->capture_default_str();
  app.add_option("--job", flags.job, "job name (store prefix, reports, metrics)")
      ->envname("STAR_JOB")->capture_default_str();
  app.add_option("--controller", flags.controller, "controller base URL for WorkerReports")
      ->envname("STAR_CONTROLLER_URL");
  app.add_option("--token", flags.token, "bearer token for the report endpoint")
      ->envname("STAR_JOB_TOKEN");
  app.add_option("--report-every", flags.report_every, "iterations per WorkerReport")
      ->envname("STAR_REPORT_EVERY")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--metrics", flags.metrics, "HOST:PORT of the Prometheus endpoint (off if empty)")
      ->envname("STAR_METRICS_ADDRESS");
  app.add_option("--timeout-ms", flags.timeout_ms, "bound on every rendezvous and collective wait")
      ->envname("STAR_TIMEOUT_MS")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--clock-origin", flags.clock_origin,
                 "monotonic-clock seconds that report and snapshot times count from (-1: start)")
      ->envname("STAR_CLOCK_ORIGIN");
  app.add_option("--snapshot-dir", flags.snapshot_dir, "worker 0 writes parameter snapshots here")
      ->envname("STAR_SNAPSHOT_DIR");
  app.add_option("--snapshot-every", flags.snapshot_every, "iterations per snapshot")
      ->envname("STAR_SNAPSHOT_EVERY")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--evaluate", flags.evaluate_dir,
                 "evaluator role: evaluate the snapshots appearing in this directory");
  app.add_option("--eval-samples", flags.eval_samples, "test samples per evaluation (0: all)")
      ->envname("STAR_EVAL_SAMPLES")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_flag("--no-eval", flags.no_eval, "never evaluate in the training loop")
      ->envname("STAR_NO_EVAL");
  CLI11_PARSE(app, argc, argv);
  return Run(flags);
}
