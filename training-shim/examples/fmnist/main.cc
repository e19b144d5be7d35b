// star-fmnist: trains the Fashion-MNIST CNN; one process per worker, through the shim.
//
// Workers meet through the rendezvous store (--store) and exchange gradients through the
// shim's Synchronizer; their WorkerSession reports to the controller (--controller) every
// --report-every iterations and puts its Decisions in force at their iteration (sync
// mode, this worker's AMP and local batch). --metrics serves star_worker_*. A lone
// worker (--world 1, no --store) trains through the same engine. With --servers P, ranks
// 0..P-1 serve the parameters (server.h) and ranks P..P+world-1 train. Flags can also
// come from the STAR_* variables named in --help (how the operator and `star local`
// configure workers). --snapshot-dir / --evaluate: evaluation in its own process
// (evaluator.h), on the job clock of --clock-origin. With --stages S > 1 the process is
// one stage of a pipeline-parallel MLP instead (pipeline.h).
//
// stdout: progress lines, then one final JSON line
//   {"final_accuracy":A,"seconds":S,"iterations":I,...}
// Errors go to stderr with exit status 1; a bad flag exits with CLI11's code.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include "evaluator.h"
#include "flags.h"
#include "pipeline.h"
#include "server.h"
#include "snapshot.h"
#include "star/shim/heap.h"
#include "star/shim/synchronizer.h"
#include "star/shim/torch_amp.h"
#include "star/shim/torch_data.h"
#include "star/shim/torch_model.h"
#include "star/shim/torch_train.h"
#include "star/shim/worker_session.h"
#include "timings.h"

namespace star::fmnist {
namespace {

using namespace star::shim;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

int Fail(const Status& s) {
  std::cerr << "star-fmnist: " << s << "\n";
  return 1;
}

// One worker: its data, model and AMP switch, over the shim's session and synchronizer.
class Worker {
 public:
  explicit Worker(const Flags& flags) : flags_(flags), worker_(flags.rank - flags.servers) {}
  Status Init();
  Status Train();
  Status Finish();

 private:
  Status Iterate();
  Status Exchange(const LocalGradient& grad);
  void Log(const LocalGradient& grad);
  Status AfterIteration();
  Status Evaluate(const char* when);
  void Mark(const char* phase);
  void PrintStartup();

  const Flags& flags_;
  const int worker_;
  std::optional<ImageDataset> train_, test_;
  std::optional<ShardRange> shard_;
  std::optional<BatchIterator> batches_;
  std::optional<AmpSwitch> amp_;
  bool amp_at_start_ = false;
  std::optional<FashionCnn> model_;  // built after the data, as the seed expects
  std::vector<float> grad_sum_;
  std::unique_ptr<Synchronizer> sync_;
  std::unique_ptr<WorkerSession> session_;
  std::vector<IterationTiming> timings_;
  Clock::time_point start_, window_start_;
  int64_t window_samples_ = 0, window_iters_ = 0, iteration_ = 0, epoch_ = 0;
  int64_t max_iterations_ = 0, eval_every_ = 0;
  double origin_ = 0;  // job clock origin: --clock-origin, or the start
  // Job-clock seconds at the end of each startup phase, printed after the first iteration.
  std::vector<std::pair<const char*, double>> startup_;
  double window_loss_ = 0, accuracy_ = -1;
  bool reached_ = false;
};

Status Worker::Init() {
  origin_ = flags_.clock_origin >= 0 ? flags_.clock_origin : MonotonicSeconds();
  Mark("main");
  STAR_ASSIGN_OR_RETURN(train_, LoadFashionMnist(flags_.data_dir, FashionMnistSplit::kTrain));
  STAR_ASSIGN_OR_RETURN(test_, LoadFashionMnist(flags_.data_dir, FashionMnistSplit::kTest));
  Mark("data");
  STAR_ASSIGN_OR_RETURN(shard_, ShardOf(train_->size(), worker_, flags_.world));
  STAR_ASSIGN_OR_RETURN(batches_, BatchIterator::Create(&*train_, *shard_, flags_.seed + 7919ULL * worker_));
  amp_at_start_ = flags_.amp == "on" || (flags_.amp == "auto" && CpuHasNativeBf16());
  STAR_ASSIGN_OR_RETURN(amp_, AmpSwitch::Create(AmpOptions{}, amp_at_start_));
  model_.emplace();
  const int64_t n = ParameterCount(**model_);
  std::vector<float> params(n);
  grad_sum_.resize(n);
  STAR_RETURN_IF_ERROR(ParametersToFlat(**model_, params));
  Mark("model");
  const WorkerConfig config = WorkerConfigOf(flags_);
  SynchronizerOptions sync_options;
  sync_options.optimizer = SgdOptionsOf(flags_);
  sync_options.tensor_sizes = TensorSizes(**model_);
  STAR_ASSIGN_OR_RETURN(sync_, Synchronizer::Connect(config, params, sync_options));
  STAR_RETURN_IF_ERROR(FlatToParameters(sync_->params(), **model_));
  Mark("connected");
  WorkerSessionOptions session_options;
  session_options.config = config;
  session_options.local_batch = flags_.batch;
  session_options.amp = amp_at_start_;
  session_options.on_report_error = [](const Status& s) {
    std::fprintf(stderr, "star-fmnist: report: %s\n", s.ToString().c_str());
  };
  STAR_ASSIGN_OR_RETURN(session_, WorkerSession::Create(std::move(session_options)));
  if (session_->metrics_port() > 0) std::printf("star-fmnist: metrics on port %d\n", session_->metrics_port());
  std::printf("star-fmnist: %lld parameters, shard [%lld, %lld), batch %lld, amp %s, threads %d\n",
              static_cast<long long>(n), static_cast<long long>(shard_->begin),
              static_cast<long long>(shard_->end), static_cast<long long>(flags_.batch),
              amp_at_start_ ? "on(bf16)" : "off", flags_.threads);
  return Status::Ok();
}

// Workers must stop at the same iteration (a peer that leaves early fails the others'
// next exchange). With several workers, epochs become an iteration budget computed the
// same way everywhere, and evaluations happen every eval_every iterations (default: one
// budget epoch); with identical parameters (SSGD) every worker then sees the same
// accuracy and stops at the same evaluation.
Status Worker::Train() {
  max_iterations_ = flags_.max_iterations;
  eval_every_ = flags_.eval_every;
  const bool together = flags_.world > 1;
  if (together) {
    const int64_t per_epoch = std::max<int64_t>(1, train_->size() / flags_.world / flags_.batch);
    if (max_iterations_ <= 0) max_iterations_ = per_epoch * flags_.epochs;
    if (eval_every_ <= 0) eval_every_ = per_epoch;
  }
  start_ = window_start_ = Clock::now();
  while (!reached_ && (together || epoch_ < flags_.epochs) &&
         (max_iterations_ <= 0 || iteration_ < max_iterations_)) {
    STAR_RETURN_IF_ERROR(Iterate());
    if (timings_.size() == 1) PrintStartup();
    STAR_RETURN_IF_ERROR(AfterIteration());
  }
  return Status::Ok();
}

void Worker::Mark(const char* phase) { startup_.emplace_back(phase, MonotonicSeconds() - origin_); }

// "star-fmnist: startup (job clock): main 0.41 s, data 0.62 s, ..., first iteration 2.90 s":
// where the time before the first iteration went (main: the process is running, LibTorch
// loaded; connected: the rendezvous and the collective's or servers' connections).
void Worker::PrintStartup() {
  Mark("first iteration");
  std::string line = "star-fmnist: startup (job clock):";
  for (size_t i = 0; i < startup_.size(); ++i) {
    char part[64];
    std::snprintf(part, sizeof part, "%s %s %.2f s", i == 0 ? "" : ",", startup_[i].first,
                  startup_[i].second);
    line += part;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// One iteration: what is in force, the local gradient, the exchange.
Status Worker::Iterate() {
  STAR_ASSIGN_OR_RETURN(IterationPlan plan, session_->BeginIteration(iteration_));
  for (const api::Decision& d : plan.received) STAR_RETURN_IF_ERROR(sync_->Schedule(d));
  amp_->set_enabled(plan.amp);
  STAR_ASSIGN_OR_RETURN(Batch batch, batches_->Next(plan.local_batch));
  STAR_RETURN_IF_ERROR(session_->BeginCompute());
  STAR_ASSIGN_OR_RETURN(LocalGradient grad, ComputeGradientSum(*model_, batch, *amp_, grad_sum_));
  STAR_RETURN_IF_ERROR(session_->EndCompute());
  STAR_RETURN_IF_ERROR(Exchange(grad));
  Log(grad);
  return Status::Ok();
}

// The synchronizer's step, timed, and the iteration's record (with the noise-scale pair
// of gradient norms when this iteration ends a report).
Status Worker::Exchange(const LocalGradient& grad) {
  const auto exchange_start = Clock::now();
  STAR_RETURN_IF_ERROR(session_->BeginCommunication());
  STAR_ASSIGN_OR_RETURN(StepStats step, sync_->Step(grad_sum_, grad.batch));
  STAR_RETURN_IF_ERROR(session_->AddWait(step.wait_seconds));
  STAR_RETURN_IF_ERROR(session_->EndCommunication());
  STAR_RETURN_IF_ERROR(FlatToParameters(sync_->params(), **model_));
  timings_.push_back({grad.compute_seconds, Seconds(exchange_start), grad.batch, amp_->enabled()});
  iteration_ = sync_->iteration();
  IterationInfo info;
  info.iteration = iteration_;
  info.local_batch = static_cast<int>(grad.batch);
  info.amp = amp_->enabled();
  info.loss = grad.mean_loss;
  if (step.link) info.link = api::LinkReading{step.link->peer, step.link->seconds, step.link->bytes};
  if (session_->report_due() && step.updated && step.update_batch > grad.batch) {
    const double b = static_cast<double>(grad.batch);
    info.local_grad_sq_norm = SquaredL2Norm(grad_sum_) / (b * b);
    info.global_grad_sq_norm = step.update_grad_sq_norm;
  }
  return session_->EndIteration(info).status();
}

void Worker::Log(const LocalGradient& grad) {
  window_samples_ += grad.batch;
  window_loss_ += grad.mean_loss;
  ++window_iters_;
  if (flags_.log_every <= 0 || iteration_ % flags_.log_every != 0) return;
  const double dt = Seconds(window_start_);
  std::printf("iteration %lld epoch %lld loss %.4f compute_ms %.2f samples_per_s %.0f\n",
              static_cast<long long>(iteration_), static_cast<long long>(epoch_),
              window_loss_ / window_iters_, 1e3 * grad.compute_seconds,
              window_samples_ / std::max(dt, 1e-9));
  std::fflush(stdout);
  window_start_ = Clock::now();
  window_samples_ = 0;
  window_loss_ = 0;
  window_iters_ = 0;
}

// Snapshot, evaluation and the end of an epoch, as due after this iteration.
Status Worker::AfterIteration() {
  if (!flags_.snapshot_dir.empty() && worker_ == 0 && flags_.snapshot_every > 0 &&
      iteration_ % flags_.snapshot_every == 0) {
    STAR_RETURN_IF_ERROR(WriteSnapshot(flags_.snapshot_dir, iteration_, MonotonicSeconds() - origin_,
                                       sync_->params()));
  }
  if (!flags_.no_eval && eval_every_ > 0 && iteration_ % eval_every_ == 0) {
    STAR_RETURN_IF_ERROR(Evaluate("eval epoch"));
  }
  // An epoch ends when this worker has seen its whole shard once more.
  if (flags_.world == 1 && batches_->samples_seen() >= (epoch_ + 1) * shard_->size()) {
    ++epoch_;
    if (!flags_.no_eval) STAR_RETURN_IF_ERROR(Evaluate("end of epoch"));
  }
  return Status::Ok();
}

Status Worker::Evaluate(const char* when) {
  STAR_ASSIGN_OR_RETURN(accuracy_, shim::Evaluate(*model_, *test_));
  std::printf("%s %lld iteration %lld test_accuracy %.4f elapsed_s %.1f\n", when,
              static_cast<long long>(epoch_), static_cast<long long>(iteration_), accuracy_,
              Seconds(start_));
  std::fflush(stdout);
  reached_ = flags_.target_accuracy > 0 && accuracy_ >= flags_.target_accuracy;
  return Status::Ok();
}

// Stops the parameter servers, evaluates once more if needed, prints the final line.
Status Worker::Finish() {
  STAR_RETURN_IF_ERROR(sync_->Finish());
  if (!flags_.no_eval && (accuracy_ < 0 || (max_iterations_ > 0 && iteration_ == max_iterations_))) {
    STAR_RETURN_IF_ERROR(Evaluate("final epoch"));
  }
  const double seconds = Seconds(start_);
  const ComputeSummary compute = SummarizeCompute(timings_);
  if (!flags_.timing_csv.empty()) STAR_RETURN_IF_ERROR(WriteTimingCsv(flags_.timing_csv, timings_));
  nlohmann::json out = {{"final_accuracy", accuracy_},     {"seconds", seconds},
                        {"iterations", iteration_},        {"epochs", epoch_},
                        {"target_reached", reached_},      {"amp", amp_at_start_},
                        {"batch", flags_.batch},           {"mean_compute_ms", compute.mean_ms},
                        {"median_compute_ms", compute.median_ms}};
  std::printf("%s\n", out.dump().c_str());
  return Status::Ok();
}

int Run(const Flags& flags) {
  // Activations are freed and allocated every iteration: keep them in the heap, so that
  // a batch change does not fault them in again each iteration (heap.h).
  if (Status s = RetainFreedHeap(); !s.ok()) std::cerr << "star-fmnist: warning: " << s << "\n";
  if (!flags.evaluate_dir.empty()) return RunEvaluator(flags);
  torch::set_num_threads(flags.threads);
  torch::manual_seed(flags.seed);
  if (Status s = Validate(WorkerConfigOf(flags)); !s.ok()) return Fail(s);
  if (flags.rank < flags.servers) return RunServer(flags);
  if (flags.stages > 1) return RunPipeline(flags);
  Worker worker(flags);
  if (Status s = worker.Init(); !s.ok()) return Fail(s);
  if (Status s = worker.Train(); !s.ok()) return Fail(s);
  if (Status s = worker.Finish(); !s.ok()) return Fail(s);
  return 0;
}

}  // namespace
}  // namespace star::fmnist

int main(int argc, char** argv) {
  star::fmnist::Flags flags;
  if (auto exit_code = star::fmnist::ParseFlags(argc, argv, &flags)) return *exit_code;
  return star::fmnist::Run(flags);
}
