#include "pipeline.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "star/core/pipeline/schedule.h"
#include "star/shim/pipeline_engine.h"
#include "star/shim/torch_data.h"
#include "star/shim/torch_stage.h"
#include "star/shim/worker_session.h"
#include "star/shim/world.h"

namespace star::fmnist {
namespace {

using namespace star::shim;

constexpr int64_t kPixels = 28 * 28, kClasses = 10;

// The warm-up depths of --warmup ("4,3,2,1"), or plain 1F1B's; checked against the shape.
StatusOr<std::vector<int>> WarmupOf(const Flags& f, int m) {
  std::vector<int> w = pipeline::OneFOneB(f.stages, m);
  if (!f.warmup.empty()) {
    w.clear();
    std::stringstream in(f.warmup);
    for (std::string part; std::getline(in, part, ',');) {
      try {
        w.push_back(std::stoi(part));
      } catch (const std::exception&) {
        return Status::InvalidArgument("--warmup (STAR_PIPELINE_WARMUP): \"" + part + "\" is not a number");
      }
    }
  }
  if (static_cast<int>(w.size()) != f.stages) {
    return Status::InvalidArgument("--warmup (STAR_PIPELINE_WARMUP): " + std::to_string(w.size()) +
                                   " depths for " + std::to_string(f.stages) + " stages");
  }
  const int cap = f.max_in_flight > 0 ? std::min(f.max_in_flight, m) : m;
  for (int d : w) {
    if (d < 1 || d > cap) {
      return Status::InvalidArgument("--warmup (STAR_PIPELINE_WARMUP): depth " + std::to_string(d) +
                                     " outside [1, " + std::to_string(cap) + "] (micro-batches, max in flight)");
    }
  }
  return w;
}

// --link-delay's "PEER:SECONDS,..." into the shape's delays to the previous and the next
// stage; a peer that is not a neighbour is an error naming it.
Status ApplyLinkDelays(const Flags& f, PipelineShape* shape) {
  const auto bad = [](const std::string& why) {
    return Status::InvalidArgument("--link-delay (STAR_LINK_DELAY): " + why);
  };
  std::stringstream in(f.link_delay);
  for (std::string part; std::getline(in, part, ',');) {
    const size_t colon = part.find(':');
    int peer = -1;
    double seconds = -1;
    try {
      if (colon == std::string::npos) throw std::invalid_argument(part);
      peer = std::stoi(part.substr(0, colon));
      seconds = std::stod(part.substr(colon + 1));
    } catch (const std::exception&) {
      return bad("\"" + part + "\" is not PEER:SECONDS");
    }
    if (peer == f.rank - 1 && shape->stage > 0) {
      shape->prev_delay_seconds = seconds;
    } else if (peer == f.rank + 1 && shape->stage < shape->stages - 1) {
      shape->next_delay_seconds = seconds;
    } else {
      return bad("worker " + std::to_string(peer) + " is not a neighbouring stage of worker " + std::to_string(f.rank));
    }
  }
  return Status::Ok();
}

// Stage `s` of the MLP: flatten and the first hidden layer, a hidden layer, or the classifier.
torch::nn::Sequential StageModule(int s, int stages, int hidden) {
  torch::nn::Sequential m;
  if (s == 0) m->push_back(torch::nn::Flatten());
  if (s == stages - 1) {
    m->push_back(torch::nn::Linear(hidden, kClasses));
  } else {
    m->push_back(torch::nn::Linear(s == 0 ? kPixels : hidden, hidden));
    m->push_back(torch::nn::ReLU());
  }
  return m;
}

class Stage {
 public:
  explicit Stage(const Flags& f)
      : f_(f), stage_(f.rank % f.stages), replica_(f.rank / f.stages), replicas_(f.world / f.stages) {}
  Status Init();
  Status Train();
  void Finish() const;

 private:
  nlohmann::json MedianMs(bool adapted) const;
  Status Iterate();
  StatusOr<int> WarmupFor(const IterationPlan& plan);
  api::PipelineReading Reading();
  Status AverageOverReplicas();
  bool FeedsOrLabels() const { return stage_ == 0 || stage_ == f_.stages - 1; }

  const Flags& f_;
  const int stage_, replica_, replicas_;
  int m_ = 0;
  std::vector<int> warmup_;   // the static depths (--warmup, or plain 1F1B)
  std::vector<int> decided_;  // the loop's depths in force; empty = the static ones
  std::vector<int> adapted_;  // the loop's latest depths, empty before any
  std::vector<bool> adapted_at_;  // per iteration: it ran the loop's depths
  std::optional<ImageDataset> train_;
  std::optional<BatchIterator> batches_;
  Batch batch_;
  torch::nn::Sequential module_{nullptr};
  std::unique_ptr<torch::optim::SGD> sgd_;
  std::unique_ptr<TorchStage> torch_stage_;
  World world_;
  std::unique_ptr<Collective> replicas_comm_;  // this stage's ranks over replicas (D > 1)
  std::unique_ptr<PipelineEngine> engine_;
  std::unique_ptr<WorkerSession> session_;
  std::vector<double> iteration_seconds_;
  std::vector<PipelineLink> links_;      // sums after the first iteration
  PipelineComputeTimes compute_;         // sums after the first iteration
  int64_t iteration_ = 0;
  double loss_ = 0;
};

Status Stage::Init() {
  if (f_.world % f_.stages != 0 || f_.servers != 0) {
    return Status::InvalidArgument("--stages " + std::to_string(f_.stages) + " must divide --world " +
                                   std::to_string(f_.world) + ", with no parameter servers");
  }
  m_ = f_.micro_batches > 0 ? f_.micro_batches : f_.stages;
  STAR_ASSIGN_OR_RETURN(warmup_, WarmupOf(f_, m_));
  if (f_.batch % m_ != 0) {
    return Status::InvalidArgument("the replica's batch " + std::to_string(f_.batch) + " is not a multiple of " +
                                   std::to_string(m_) + " micro-batches (STAR_MICRO_BATCHES)");
  }
  if (FeedsOrLabels()) {
    STAR_ASSIGN_OR_RETURN(train_, LoadFashionMnist(f_.data_dir, FashionMnistSplit::kTrain));
    STAR_ASSIGN_OR_RETURN(ShardRange shard, ShardOf(train_->size(), replica_, replicas_));
    STAR_ASSIGN_OR_RETURN(batches_, BatchIterator::Create(&*train_, shard, f_.seed + 7919ULL * replica_));
  }
  torch::manual_seed(f_.seed + static_cast<uint64_t>(stage_));  // every replica of a stage alike
  module_ = StageModule(stage_, f_.stages, f_.hidden);
  sgd_ = std::make_unique<torch::optim::SGD>(module_->parameters(),
                                             torch::optim::SGDOptions(f_.lr).momentum(f_.momentum));
  const int64_t micro = f_.batch / m_;
  PipelineShape shape{f_.stages, stage_, m_};
  if (stage_ > 0) shape.input_floats = static_cast<size_t>(micro * f_.hidden);
  if (stage_ < f_.stages - 1) shape.output_floats = static_cast<size_t>(micro * f_.hidden);
  STAR_RETURN_IF_ERROR(ApplyLinkDelays(f_, &shape));
  torch_stage_ = std::make_unique<TorchStage>(
      module_, shape, std::vector<int64_t>{micro, f_.hidden},
      [this, micro](int j) -> StatusOr<torch::Tensor> { return batch_.images.narrow(0, j * micro, micro); },
      [this, micro](int j, const torch::Tensor& y) -> StatusOr<torch::Tensor> {
        return torch::nn::functional::cross_entropy(y, batch_.labels.narrow(0, j * micro, micro));
      });
  const WorkerConfig config = WorkerConfigOf(f_);
  STAR_ASSIGN_OR_RETURN(world_, ConnectWorld(config));
  STAR_ASSIGN_OR_RETURN(engine_, PipelineEngine::Connect(*world_.collective, shape, torch_stage_->Functions()));
  if (replicas_ > 1) {
    std::vector<int> members;
    for (int r = 0; r < replicas_; ++r) members.push_back(r * f_.stages + stage_);
    STAR_ASSIGN_OR_RETURN(replicas_comm_,
                          world_.collective->Split(members, "pipeline-stage-" + std::to_string(stage_)));
  }
  WorkerSessionOptions options;
  options.config = config;
  options.local_batch = f_.batch;
  STAR_ASSIGN_OR_RETURN(session_, WorkerSession::Create(std::move(options)));
  return Status::Ok();
}

Status Stage::Train() {
  // Without a budget: --epochs passes of a replica's shard of the 60,000 training images.
  const int64_t budget =
      f_.max_iterations > 0 ? f_.max_iterations : f_.epochs * std::max<int64_t>(1, 60000 / replicas_ / f_.batch);
  while (iteration_ < budget) STAR_RETURN_IF_ERROR(Iterate());
  return session_->Flush(std::chrono::milliseconds(5000));
}

Status Stage::Iterate() {
  STAR_ASSIGN_OR_RETURN(IterationPlan plan, session_->BeginIteration(iteration_));
  // Only the loop's depths are taken up: its modes and batches are for data parallelism.
  STAR_ASSIGN_OR_RETURN(const int warmup, WarmupFor(plan));
  const double start = MonotonicSeconds();
  STAR_RETURN_IF_ERROR(session_->BeginCompute());
  if (FeedsOrLabels()) {
    STAR_ASSIGN_OR_RETURN(batch_, batches_->Next(f_.batch));
  }
  sgd_->zero_grad();
  STAR_RETURN_IF_ERROR(engine_->RunIteration(warmup));
  STAR_RETURN_IF_ERROR(session_->EndCompute());
  STAR_RETURN_IF_ERROR(session_->BeginCommunication());
  STAR_RETURN_IF_ERROR(AverageOverReplicas());
  STAR_RETURN_IF_ERROR(session_->EndCommunication());
  sgd_->step();
  iteration_seconds_.push_back(MonotonicSeconds() - start);
  adapted_at_.push_back(!plan.warmup.empty());
  loss_ = torch_stage_->TakeLoss();
  IterationInfo info;
  info.pipeline = Reading();
  info.iteration = ++iteration_;
  info.local_batch = static_cast<int>(f_.batch);
  if (stage_ == f_.stages - 1) info.loss = loss_;
  return session_->EndIteration(info).status();
}

// The loop's warm-up depth for this stage when a decision gives one, else the static one.
StatusOr<int> Stage::WarmupFor(const IterationPlan& plan) {
  if (!plan.warmup.empty() && static_cast<int>(plan.warmup.size()) != f_.stages) {
    return Status::InvalidArgument("decision.warmup: " + std::to_string(plan.warmup.size()) + " depths for " +
                                   std::to_string(f_.stages) + " stages");
  }
  if (plan.warmup != decided_) {
    decided_ = plan.warmup;
    std::cerr << "star-fmnist: stage " << stage_ << ": warm-up depths "
              << nlohmann::json(decided_.empty() ? warmup_ : decided_).dump()
              << (decided_.empty() ? " (static)" : " (the loop's)") << " from iteration " << iteration_ << "\n";
  }
  if (plan.warmup.empty()) return warmup_[static_cast<size_t>(stage_)];
  adapted_ = plan.warmup;
  return plan.warmup[static_cast<size_t>(stage_)];
}

// This iteration's costs for the report (and the totals for the result line): the
// engine's compute per micro-batch and, per link, the time to send one message.
api::PipelineReading Stage::Reading() {
  const PipelineComputeTimes c = engine_->TakeComputeTimes();
  const std::vector<PipelineLink> links = engine_->TakeLinks();
  links_.resize(links.size());
  if (iteration_ > 0) {  // the first iteration connects: left out of the totals
    compute_.forward_seconds += c.forward_seconds;
    compute_.forwards += c.forwards;
    compute_.backward_seconds += c.backward_seconds;
    compute_.backwards += c.backwards;
    for (size_t i = 0; i < links.size(); ++i) {
      links_[i].peer = links[i].peer;
      links_[i].send_seconds += links[i].send_seconds;
      links_[i].messages_sent += links[i].messages_sent;
      links_[i].wait_seconds += links[i].wait_seconds;
    }
  }
  return ReadingOf(stage_, c, links);
}

Status Stage::AverageOverReplicas() {
  if (!replicas_comm_) return Status::Ok();
  for (torch::Tensor& p : module_->parameters()) {
    torch::Tensor g = p.mutable_grad();
    STAR_RETURN_IF_ERROR(replicas_comm_->AllReduceSum(g.data_ptr<float>(), static_cast<size_t>(g.numel())));
    g.div_(replicas_);
  }
  return Status::Ok();
}

// The median iteration in ms over the iterations after the first that ran (adapted or
// not) the loop's depths; null when there were none.
nlohmann::json Stage::MedianMs(bool adapted) const {
  std::vector<double> times;
  for (size_t i = 1; i < iteration_seconds_.size(); ++i) {
    if (adapted_at_[i] == adapted) times.push_back(1e3 * iteration_seconds_[i]);
  }
  if (times.empty()) return nullptr;
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

void Stage::Finish() const {
  nlohmann::json links = nlohmann::json::array();
  for (const PipelineLink& l : links_) {
    links.push_back({{"peer", l.peer},
                     {"send_ms", 1e3 * l.send_seconds},
                     {"messages", l.messages_sent},
                     {"wait_ms", 1e3 * l.wait_seconds}});
  }
  const auto mean_ms = [](double seconds, int n) { return n > 0 ? 1e3 * seconds / n : 0.0; };
  const nlohmann::json adapted_ms = MedianMs(true), static_ms = MedianMs(false);
  nlohmann::json out = {{"stage", stage_},
                        {"replica", replica_},
                        {"iterations", iteration_},
                        {"micro_batches", m_},
                        {"warmup", warmup_},
                        {"adapted_warmup", adapted_},
                        {"median_iteration_ms", static_ms.is_null() ? adapted_ms : static_ms},
                        {"adapted_median_iteration_ms", adapted_ms},
                        {"forward_ms", mean_ms(compute_.forward_seconds, compute_.forwards)},
                        {"backward_ms", mean_ms(compute_.backward_seconds, compute_.backwards)},
                        {"last_loss", loss_},
                        {"links", links}};
  std::printf("%s\n", out.dump().c_str());
}

}  // namespace

int RunPipeline(const Flags& flags) {
  Stage stage(flags);
  Status s = stage.Init();
  if (s.ok()) s = stage.Train();
  if (!s.ok()) {
    std::cerr << "star-fmnist: stage " << flags.rank % flags.stages << ": " << s << "\n";
    return 1;
  }
  stage.Finish();
  return 0;
}

}  // namespace star::fmnist
