#include "star/shim/parameter_server.h"

#include "engine/pending_decisions.h"

#include <algorithm>
#include <string>
#include <utility>

namespace star::shim {
namespace {

// Point-to-point tags ("PS" + kind).
constexpr uint32_t kGradTag = 0x50530001;   // worker -> server: gradient header + shard
constexpr uint32_t kReplyTag = 0x50530002;  // server -> worker: reply header + shard

// Gradient header fields (see the header's wire format).
constexpr size_t kKind = 0, kBatch = 1, kIter = 2, kVersion = 4, kTag = 6, kMode = 8, kK = 9,
                 kStart = 10, kGradHeader = 12;
constexpr float kGradient = 0.0f, kDone = 1.0f;
// Reply header fields.
constexpr size_t kCode = 0, kReplyVersion = 1, kReplyHeader = 3;

constexpr int64_t kHalf = int64_t{1} << 20;
constexpr int64_t kMaxInt = kHalf * kHalf;
constexpr int64_t kMaxBatch = int64_t{1} << 24;

void PutInt(std::vector<float>& m, size_t at, int64_t v) {
  m[at] = static_cast<float>(v / kHalf);
  m[at + 1] = static_cast<float>(v % kHalf);
}
int64_t GetInt(const std::vector<float>& m, size_t at) {
  return static_cast<int64_t>(m[at]) * kHalf + static_cast<int64_t>(m[at + 1]);
}

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string Describe(const PsRegime& r) {
  if (r.tag == 0) return "the initial ssgd";
  std::string s = "decision epoch " + std::to_string(r.tag - 1) + " (" +
                  std::string(api::ToString(r.mode));
  if (r.mode == api::SyncMode::kFixedK) s += " k=" + std::to_string(r.k);
  return s + " from iteration " + std::to_string(r.start) + ")";
}

// Checks what both roles' Create share; returns the plan.
StatusOr<ShardPlan> CheckWorld(const Collective* world, int num_servers,
                               const std::vector<size_t>& tensor_sizes) {
  if (world == nullptr) return Status::InvalidArgument("world: must not be null");
  STAR_ASSIGN_OR_RETURN(ShardPlan plan, PlanShards(tensor_sizes, num_servers));
  if (world->size() <= num_servers) {
    return Status::InvalidArgument("world: size " + std::to_string(world->size()) +
                                   " leaves no workers after " + std::to_string(num_servers) +
                                   " servers");
  }
  if (world->size() - num_servers >= kHalf) {
    return Status::InvalidArgument("world: too many workers");
  }
  return plan;
}

// Copies the shard of server s out of (gather) or into (scatter) the flat buffer.
void Gather(const ShardPlan& plan, int s, std::span<const float> flat, float* out) {
  for (size_t t : plan.tensors[static_cast<size_t>(s)]) {
    std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(plan.offset[t]), plan.size[t], out);
    out += plan.size[t];
  }
}
void Scatter(const ShardPlan& plan, int s, const float* in, std::vector<float>& flat) {
  for (size_t t : plan.tensors[static_cast<size_t>(s)]) {
    std::copy_n(in, plan.size[t], flat.begin() + static_cast<std::ptrdiff_t>(plan.offset[t]));
    in += plan.size[t];
  }
}

// Servers broadcast their shards, in server order, over the whole world. `mine` is the
// caller's shard when it is a server (nullptr for a worker); `flat` receives everything.
Status BroadcastShards(Collective* world, const ShardPlan& plan, const float* mine,
                       std::vector<float>& flat) {
  for (size_t s = 0; s < plan.load.size(); ++s) {
    if (plan.load[s] == 0) continue;
    std::vector<float> buf(plan.load[s]);
    if (world->rank() == static_cast<int>(s)) std::copy_n(mine, buf.size(), buf.begin());
    STAR_RETURN_IF_ERROR(world->Broadcast(buf.data(), buf.size(), static_cast<int>(s))
                             .WithPrefix("parameter server: broadcasting shard " +
                                         std::to_string(s)));
    Scatter(plan, static_cast<int>(s), buf.data(), flat);
  }
  return Status::Ok();
}

}  // namespace

// One gradient from one worker, waiting on the server.
struct ParameterServer::Arrival {
  std::vector<float> grad;  // shard-sized gradient sum
  int64_t batch = 0;
  int64_t iteration = 0;
  int64_t version = 0;
  PsRegime regime;
};

ParameterServer::ParameterServer(std::unique_ptr<Collective> world, int num_servers,
                                 ShardPlan plan, std::vector<float> shard, SgdOptions optimizer,
                                 PsOptions options)
    : world_(std::move(world)),
      num_servers_(num_servers),
      num_workers_(world_->size() - num_servers),
      plan_(std::move(plan)),
      shard_(std::move(shard)),
      velocity_(shard_.size(), 0.0f),
      optimizer_(optimizer),
      options_(options) {
  const size_t w = static_cast<size_t>(num_workers_);
  pending_.resize(w);
  held_.resize(w);
  done_.assign(w, false);
  last_iteration_.assign(w, -1);
  idle_since_.assign(w, Clock::now());
  stats_.applied_by_worker.assign(w, 0);
}

ParameterServer::~ParameterServer() = default;

int ParameterServer::server_index() const { return world_->rank(); }

StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Create(
    std::unique_ptr<Collective> world, int num_servers, const std::vector<size_t>& tensor_sizes,
    std::span<const float> initial_params, SgdOptions optimizer, PsOptions options) {
  STAR_ASSIGN_OR_RETURN(ShardPlan plan, CheckWorld(world.get(), num_servers, tensor_sizes));
  if (world->rank() >= num_servers) {
    return Status::InvalidArgument("world: rank " + std::to_string(world->rank()) +
                                   " is a worker, not one of the " +
                                   std::to_string(num_servers) + " servers");
  }
  if (initial_params.size() != plan.total) {
    return Status::InvalidArgument("initial_params: size " + std::to_string(initial_params.size()) +
                                   ", expected " + std::to_string(plan.total));
  }
  if (!(optimizer.lr > 0)) return Status::InvalidArgument("optimizer.lr: must be > 0");
  if (!(optimizer.momentum >= 0 && optimizer.momentum < 1)) {
    return Status::InvalidArgument("optimizer.momentum: must be in [0, 1)");
  }
  if (!(optimizer.weight_decay >= 0)) {
    return Status::InvalidArgument("optimizer.weight_decay: must be >= 0");
  }
  if (options.timeout.count() <= 0) return Status::InvalidArgument("options.timeout: must be > 0");
  const int s = world->rank();
  std::vector<float> shard(plan.load[static_cast<size_t>(s)]);
  Gather(plan, s, initial_params, shard.data());
  std::vector<float> flat(plan.total);
  STAR_RETURN_IF_ERROR(BroadcastShards(world.get(), plan, shard.data(), flat));
  return std::unique_ptr<ParameterServer>(new ParameterServer(
      std::move(world), num_servers, std::move(plan), std::move(shard), optimizer, options));
}

Status ParameterServer::Run() {
  if (!failed_.ok()) {
    return Status::FailedPrecondition("parameter server failed earlier: " + failed_.ToString());
  }
  std::fill(idle_since_.begin(), idle_since_.end(), Clock::now());
  Status s = Serve();
  if (!s.ok()) {
    s = s.WithPrefix("parameter server " + std::to_string(server_index()));
    Abort(s);
    failed_ = s;
  }
  return s;
}

Status ParameterServer::Serve() {
  std::vector<float> msg(kGradHeader + shard_.size());
  while (true) {
    std::vector<int> idle;  // world ranks of the workers this server waits on
    bool all_done = true;
    const Clock::time_point now = Clock::now();
    for (int w = 0; w < num_workers_; ++w) {
      const size_t i = static_cast<size_t>(w);
      if (done_[i]) continue;
      all_done = false;
      if (pending_[i] || held_[i]) continue;
      if (now - idle_since_[i] > options_.timeout) {
        return Status::DeadlineExceeded(
            "worker " + std::to_string(w) + " (rank " + std::to_string(num_servers_ + w) +
            ") sent nothing for " + std::to_string(options_.timeout.count()) +
            " ms while this server waited on it");
      }
      idle.push_back(num_servers_ + w);
    }
    if (all_done) return Status::Ok();
    if (idle.empty()) {
      return Status::Internal("no worker can send and no update can fire (mode " +
                              std::string(api::ToString(regime_.mode)) + ")");
    }
    StatusOr<int> from = world_->RecvFromAny(msg.data(), msg.size(), idle, kGradTag);
    if (!from.ok()) return from.status().WithPrefix("waiting for gradients (" + State() + ")");
    STAR_RETURN_IF_ERROR(Receive(*from - num_servers_, msg));
    STAR_RETURN_IF_ERROR(Advance());
  }
}

std::string ParameterServer::State() const {
  std::string pending, held;
  for (int w = 0; w < num_workers_; ++w) {
    const size_t i = static_cast<size_t>(w);
    if (pending_[i]) {
      pending += " " + std::to_string(w) + "@v" + std::to_string(pending_[i]->version);
    }
    if (held_[i]) held += " " + std::to_string(w);
  }
  return std::string(api::ToString(regime_.mode)) + " version " + std::to_string(stats_.updates) +
         "; pending:" + (pending.empty() ? " none" : pending) +
         "; waiting to switch:" + (held.empty() ? " none" : held);
}

Status ParameterServer::Receive(int w, const std::vector<float>& msg) {
  const size_t i = static_cast<size_t>(w);
  const std::string who = "worker " + std::to_string(w);
  if (msg[kKind] == kDone) {
    done_[i] = true;
    return Status::Ok();
  }
  if (msg[kKind] != kGradient) return Status::Internal(who + ": unknown message kind");
  auto a = std::make_unique<Arrival>();
  a->batch = static_cast<int64_t>(msg[kBatch]);
  a->iteration = GetInt(msg, kIter);
  a->version = GetInt(msg, kVersion);
  a->regime.tag = GetInt(msg, kTag);
  const int mode = static_cast<int>(msg[kMode]);
  if (mode < 0 || mode > static_cast<int>(api::SyncMode::kAsgd) || a->batch < 1) {
    return Status::Internal(who + ": malformed gradient header");
  }
  a->regime.mode = static_cast<api::SyncMode>(mode);
  a->regime.k = static_cast<int>(msg[kK]);
  a->regime.start = GetInt(msg, kStart);
  a->grad.assign(msg.begin() + kGradHeader, msg.end());
  if (a->iteration != last_iteration_[i] + 1) {
    return Status::Internal(who + ": sent iteration " + std::to_string(a->iteration) +
                            " after " + std::to_string(last_iteration_[i]));
  }
  last_iteration_[i] = a->iteration;
  const std::string at = who + " at iteration " + std::to_string(a->iteration) + " runs ";

  if (a->regime == regime_) {
    if (announced_ && a->iteration >= announced_->start) {
      return Status::Aborted(at + Describe(a->regime) + ", but another worker switched to " +
                             Describe(*announced_));
    }
    pending_[i] = std::move(a);
    return Status::Ok();
  }
  if (announced_ && a->regime != *announced_) {
    return Status::Aborted(at + Describe(a->regime) + ", but another worker runs " +
                           Describe(*announced_));
  }
  const bool older = a->regime.start < regime_.start ||
                     (a->regime.start == regime_.start && a->regime.tag <= regime_.tag);
  if (a->regime.start != a->iteration || older) {
    return Status::Aborted(at + Describe(a->regime) + " out of order after " +
                           Describe(regime_));
  }
  if (!announced_) {
    for (int v = 0; v < num_workers_; ++v) {
      if (v != w && last_iteration_[static_cast<size_t>(v)] >= a->regime.start) {
        return Status::Aborted(at + Describe(a->regime) + ", but worker " + std::to_string(v) +
                               " ran iteration " +
                               std::to_string(last_iteration_[static_cast<size_t>(v)]) +
                               " under " + Describe(regime_));
      }
    }
    announced_ = a->regime;
  }
  held_[i] = std::move(a);
  return Status::Ok();
}

Status ParameterServer::Advance() {
  // Bounded: each pass fires an update (emptying pending gradients) or switches once.
  for (int pass = 0; pass < 4 * num_workers_ + 4; ++pass) {
    std::vector<int> ready;
    int fresh = 0;
    bool waiting = false;  // some running worker may still send under the current mode
    for (int w = 0; w < num_workers_; ++w) {
      const size_t i = static_cast<size_t>(w);
      if (pending_[i]) {
        ready.push_back(w);
        if (pending_[i]->version == stats_.updates) ++fresh;
      } else if (!done_[i] && !held_[i]) {
        waiting = true;
      }
    }
    if (!ready.empty()) {
      bool fire = !waiting;
      switch (regime_.mode) {
        case api::SyncMode::kSsgd:
          break;
        case api::SyncMode::kFixedK:
          fire = fire || fresh >= regime_.k;
          break;
        case api::SyncMode::kAsgd:
          fire = true;
          ready.resize(1);
          break;
        case api::SyncMode::kGroups:
          return Status::Internal("groups mode reached a parameter server");
      }
      if (!fire) return Status::Ok();
      STAR_RETURN_IF_ERROR(Fire(ready));
      continue;
    }
    if (announced_ && !waiting) {
      regime_ = *announced_;
      announced_.reset();
      ++stats_.switches;
      for (size_t i = 0; i < held_.size(); ++i) pending_[i] = std::move(held_[i]);
      continue;
    }
    return Status::Ok();
  }
  return Status::Internal("update loop did not settle");
}

Status ParameterServer::Fire(const std::vector<int>& workers) {
  const size_t n = shard_.size();
  std::vector<float> sum(n, 0.0f);
  int64_t batch = 0;
  std::vector<std::unique_ptr<Arrival>> taken;
  for (int w : workers) {  // ascending: the sum is deterministic for ssgd
    std::unique_ptr<Arrival> a = std::move(pending_[static_cast<size_t>(w)]);
    for (size_t j = 0; j < n; ++j) sum[j] += a->grad[j];
    batch += a->batch;
    if (a->version < stats_.updates) ++stats_.late_gradients;
    ++stats_.applied_by_worker[static_cast<size_t>(w)];
    taken.push_back(std::move(a));
  }
  const float inv = 1.0f / static_cast<float>(batch);
  // Asynchrony begets momentum (Mitliagkas et al., 2016): n workers updating one at a
  // time add an implicit momentum of about 1 - 1/n, so ASGD runs with the explicit
  // momentum lowered by that much (with 0.9 and 4 workers, 0.9 unchanged diverges).
  float mu = optimizer_.momentum;
  if (regime_.mode == api::SyncMode::kAsgd && num_workers_ > 1) {
    mu = std::max(0.0f, mu - (1.0f - 1.0f / static_cast<float>(num_workers_)));
  }
  const bool momentum = optimizer_.momentum > 0;
  for (size_t j = 0; j < n; ++j) {
    float step = sum[j] * inv + optimizer_.weight_decay * shard_[j];
    if (momentum) {
      velocity_[j] = mu * velocity_[j] + step;
      step = velocity_[j];
    }
    shard_[j] -= optimizer_.lr * step;
  }
  ++stats_.updates;
  stats_.gradients_applied += static_cast<int64_t>(workers.size());
  stats_.samples_applied += batch;

  std::vector<float> reply(kReplyHeader + *std::max_element(plan_.load.begin(), plan_.load.end()),
                           0.0f);
  PutInt(reply, kReplyVersion, stats_.updates);
  std::copy(shard_.begin(), shard_.end(), reply.begin() + kReplyHeader);
  for (int w : workers) {
    STAR_RETURN_IF_ERROR(world_->Send(reply.data(), reply.size(), num_servers_ + w, kReplyTag)
                             .WithPrefix("replying to worker " + std::to_string(w)));
    idle_since_[static_cast<size_t>(w)] = Clock::now();
  }
  return Status::Ok();
}

void ParameterServer::Abort(const Status& error) {
  std::vector<float> reply(kReplyHeader + *std::max_element(plan_.load.begin(), plan_.load.end()),
                           0.0f);
  reply[kCode] = static_cast<float>(static_cast<int>(error.code()));
  for (int w = 0; w < num_workers_; ++w) {
    const size_t i = static_cast<size_t>(w);
    if (!pending_[i] && !held_[i]) continue;
    pending_[i].reset();
    held_[i].reset();
    // Best effort: a worker that is gone fails on its own.
    (void)world_->Send(reply.data(), reply.size(), num_servers_ + w, kReplyTag);
  }
}

// ---------------------------------------------------------------------------------------

PsWorker::PsWorker(std::unique_ptr<Collective> world, int num_servers, ShardPlan plan)
    : world_(std::move(world)),
      num_servers_(num_servers),
      plan_(std::move(plan)),
      max_load_(*std::max_element(plan_.load.begin(), plan_.load.end())),
      params_(plan_.total, 0.0f),
      versions_(static_cast<size_t>(num_servers), 0) {}

PsWorker::~PsWorker() = default;

int PsWorker::worker_index() const { return world_->rank() - num_servers_; }
int PsWorker::num_workers() const { return world_->size() - num_servers_; }

StatusOr<std::unique_ptr<PsWorker>> PsWorker::Create(std::unique_ptr<Collective> world,
                                                     int num_servers,
                                                     const std::vector<size_t>& tensor_sizes,
                                                     PsOptions options) {
  STAR_ASSIGN_OR_RETURN(ShardPlan plan, CheckWorld(world.get(), num_servers, tensor_sizes));
  if (world->rank() < num_servers) {
    return Status::InvalidArgument("world: rank " + std::to_string(world->rank()) +
                                   " is a server, not a worker");
  }
  if (options.timeout.count() <= 0) return Status::InvalidArgument("options.timeout: must be > 0");
  std::unique_ptr<PsWorker> worker(new PsWorker(std::move(world), num_servers, std::move(plan)));
  STAR_RETURN_IF_ERROR(
      BroadcastShards(worker->world_.get(), worker->plan_, nullptr, worker->params_));
  return worker;
}

Status PsWorker::Schedule(const api::Decision& d) {
  STAR_RETURN_IF_ERROR(api::Validate(d, "decision"));
  if (d.mode == api::SyncMode::kGroups) {
    return Status::Unimplemented("decision.mode: groups is not supported with parameter servers");
  }
  if (d.mode == api::SyncMode::kFixedK && d.k > num_workers()) {
    return Status::InvalidArgument("decision.k: " + std::to_string(d.k) + " exceeds the " +
                                   std::to_string(num_workers()) + " workers");
  }
  if (d.apply_at_iteration < iteration_) {
    return Status::FailedPrecondition(
        "decision.apply_at_iteration: " + std::to_string(d.apply_at_iteration) +
        " already passed (this worker is at iteration " + std::to_string(iteration_) + ")");
  }
  if (d.apply_at_iteration >= kMaxInt || d.epoch >= kMaxInt - 1) {  // the tag is epoch + 1
    return Status::InvalidArgument("decision: epoch or apply_at_iteration too large");
  }
  return internal::AddPending(pending_, d);
}

StatusOr<StepStats> PsWorker::Step(std::span<const float> local_grad_sum, int64_t local_batch) {
  if (!failed_.ok()) {
    return Status::FailedPrecondition("parameter-server worker failed earlier: " +
                                      failed_.ToString());
  }
  if (finished_) return Status::FailedPrecondition("parameter-server worker: Finish was called");
  if (local_grad_sum.size() != params_.size()) {
    return Status::InvalidArgument("local_grad_sum: size " + std::to_string(local_grad_sum.size()) +
                                   ", expected " + std::to_string(params_.size()));
  }
  if (local_batch < 1 || local_batch >= kMaxBatch) {
    return Status::InvalidArgument("local_batch: must be in [1, 2^24), got " +
                                   std::to_string(local_batch));
  }
  StepStats stats;
  Status s = StepImpl(local_grad_sum, local_batch, stats);
  if (!s.ok()) {
    failed_ = s.WithPrefix("parameter-server worker " + std::to_string(worker_index()));
    return failed_;
  }
  return stats;
}

Status PsWorker::SendToServers(float kind, std::span<const float> grad, int64_t batch) {
  for (int s = 0; s < num_servers_; ++s) {
    std::vector<float> msg(kGradHeader + plan_.load[static_cast<size_t>(s)], 0.0f);
    msg[kKind] = kind;
    msg[kBatch] = static_cast<float>(batch);
    PutInt(msg, kIter, iteration_);
    PutInt(msg, kVersion, versions_[static_cast<size_t>(s)]);
    PutInt(msg, kTag, regime_.tag);
    msg[kMode] = static_cast<float>(static_cast<int>(regime_.mode));
    msg[kK] = static_cast<float>(regime_.k);
    PutInt(msg, kStart, regime_.start);
    if (!grad.empty()) Gather(plan_, s, grad, msg.data() + kGradHeader);
    STAR_RETURN_IF_ERROR(world_->Send(msg.data(), msg.size(), s, kGradTag)
                             .WithPrefix("sending to server " + std::to_string(s)));
  }
  return Status::Ok();
}

Status PsWorker::StepImpl(std::span<const float> grad, int64_t batch, StepStats& stats) {
  if (auto it = pending_.find(iteration_); it != pending_.end()) {
    const api::Decision& d = it->second;
    if (!api::SameSynchronization(d, in_force_)) {  // else batches/AMP only: no switch
      regime_ = PsRegime{.tag = d.epoch + 1,
                         .mode = d.mode,
                         .k = d.mode == api::SyncMode::kFixedK ? d.k : 0,
                         .start = iteration_};
      in_force_ = d;
    }
    pending_.erase(it);
  }
  Clock::time_point t0 = Clock::now();
  STAR_RETURN_IF_ERROR(SendToServers(kGradient, grad, batch));
  stats.communication_seconds += Since(t0);

  t0 = Clock::now();
  std::vector<int> remaining(static_cast<size_t>(num_servers_));
  for (int s = 0; s < num_servers_; ++s) remaining[static_cast<size_t>(s)] = s;
  std::vector<float> reply(kReplyHeader + max_load_);
  while (!remaining.empty()) {
    StatusOr<int> from = world_->RecvFromAny(reply.data(), reply.size(), remaining, kReplyTag);
    if (!from.ok()) return from.status().WithPrefix("waiting for parameters");
    const int s = *from;
    if (reply[kCode] != 0.0f) {
      const auto code = static_cast<StatusCode>(static_cast<int>(reply[kCode]));
      return Status::Aborted("parameter server " + std::to_string(s) + " failed with " +
                             std::string(StatusCodeName(code)) +
                             " (its own status names the cause)");
    }
    versions_[static_cast<size_t>(s)] = GetInt(reply, kReplyVersion);
    Scatter(plan_, s, reply.data() + kReplyHeader, params_);
    remaining.erase(std::find(remaining.begin(), remaining.end(), s));
  }
  stats.wait_seconds += Since(t0);
  ++iteration_;
  stats.iteration = iteration_;
  return Status::Ok();
}

Status PsWorker::Finish() {
  if (!failed_.ok()) {
    return Status::FailedPrecondition("parameter-server worker failed earlier: " +
                                      failed_.ToString());
  }
  if (finished_) return Status::Ok();
  finished_ = true;
  Status s = SendToServers(kDone, {}, 0);
  if (!s.ok()) failed_ = s.WithPrefix("parameter-server worker " + std::to_string(worker_index()));
  return s.ok() ? s : failed_;
}

}  // namespace star::shim
