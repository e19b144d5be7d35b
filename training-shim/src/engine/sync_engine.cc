#include "star/shim/sync_engine.h"

#include "engine/pending_decisions.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>

namespace star::shim {
namespace {

// Point-to-point tags of the engine ("SE" + kind).
constexpr uint32_t kGradTag = 0x53450001;     // child -> parent on p2p: [grad P, batch, count]
constexpr uint32_t kParamsTag = 0x53450002;   // parent -> child on world: [params P, iter x2, flag]
constexpr uint32_t kCheckTag = 0x53450003;    // rank r -> 0 on world: CheckMessage
constexpr uint32_t kVerdictTag = 0x53450004;  // rank 0 -> r on world: [ok]

// Integers travel as floats in 20-bit halves so they stay exact.
constexpr int64_t kHalf = int64_t{1} << 20;

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t Fingerprint(const api::Decision& d) {
  const std::string s = api::ToJson(d).dump();
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// [has decision, 4 x 16 bits of its fingerprint, iteration high, iteration low]
constexpr size_t kCheckSize = 7;
std::vector<float> CheckMessage(const api::Decision* d, int64_t iteration) {
  std::vector<float> m(kCheckSize, 0.0f);
  if (d != nullptr) {
    const uint64_t h = Fingerprint(*d);
    m[0] = 1.0f;
    for (int i = 0; i < 4; ++i) m[1 + static_cast<size_t>(i)] = static_cast<float>((h >> (16 * i)) & 0xFFFF);
  }
  m[5] = static_cast<float>(iteration / kHalf);
  m[6] = static_cast<float>(iteration % kHalf);
  return m;
}

// The fixed-k order of ranks, fastest first (see the header's convention).
std::vector<int> FixedKOrder(const api::Decision& d, int n) {
  std::vector<int> order;
  std::vector<bool> listed(static_cast<size_t>(n), false);
  for (const auto& g : d.groups) {
    for (int r : g) {
      order.push_back(r);
      listed[static_cast<size_t>(r)] = true;
    }
  }
  for (int r = 0; r < n; ++r) {
    if (!listed[static_cast<size_t>(r)]) order.push_back(r);
  }
  return order;
}

}  // namespace

// Fixed-k parent: a thread receives child gradients on the p2p communicator (which only it
// uses while it runs) whenever some child has no gradient waiting; the main thread takes
// the arrivals each round.
struct SyncEngine::ChildInbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> children;
  std::vector<bool> received;  // by index in children: a gradient is waiting for its reply
  std::vector<std::pair<int, std::vector<float>>> arrivals;  // (child index, message)
  bool stop = false;
  Status error;
  std::thread thread;

  bool AnyAwaited() const {
    return std::find(received.begin(), received.end(), false) != received.end();
  }
  size_t IndexOf(int child) const {
    return static_cast<size_t>(std::find(children.begin(), children.end(), child) -
                               children.begin());
  }

  void Run(Collective* p2p, size_t message_size) {
    std::vector<float> buf(message_size);
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || AnyAwaited(); });
        if (stop) return;
      }
      StatusOr<int> from = p2p->RecvFromAny(buf.data(), buf.size(), children, kGradTag);
      std::lock_guard<std::mutex> lock(mu);
      if (!from.ok()) {
        error = from.status().WithPrefix("fixed_k parent receiving child gradients");
        cv.notify_all();
        return;
      }
      const size_t i = IndexOf(*from);
      received[i] = true;
      arrivals.emplace_back(static_cast<int>(i), buf);
      cv.notify_all();
    }
  }
};

SyncEngine::SyncEngine(std::unique_ptr<Collective> world, std::unique_ptr<Collective> p2p,
                       std::vector<float> params, SgdOptions optimizer, EngineOptions options)
    : world_(std::move(world)),
      p2p_(std::move(p2p)),
      params_(std::move(params)),
      velocity_(params_.size(), 0.0f),
      optimizer_(optimizer),
      options_(options) {}

SyncEngine::~SyncEngine() { StopInbox(); }

int SyncEngine::rank() const { return world_->rank(); }
int SyncEngine::size() const { return world_->size(); }

StatusOr<std::unique_ptr<SyncEngine>> SyncEngine::Create(std::unique_ptr<Collective> world,
                                                         std::vector<float> initial_params,
                                                         SgdOptions optimizer,
                                                         EngineOptions options) {
  if (world == nullptr) return Status::InvalidArgument("world: must not be null");
  if (initial_params.empty()) return Status::InvalidArgument("initial_params: must not be empty");
  if (!(optimizer.lr > 0)) {
    return Status::InvalidArgument("optimizer.lr: must be > 0, got " + std::to_string(optimizer.lr));
  }
  if (!(optimizer.momentum >= 0 && optimizer.momentum < 1)) {
    return Status::InvalidArgument("optimizer.momentum: must be in [0, 1), got " +
                                   std::to_string(optimizer.momentum));
  }
  if (!(optimizer.weight_decay >= 0)) {
    return Status::InvalidArgument("optimizer.weight_decay: must be >= 0, got " +
                                   std::to_string(optimizer.weight_decay));
  }
  if (options.timeout.count() <= 0) {
    return Status::InvalidArgument("options.timeout: must be > 0");
  }
  STAR_RETURN_IF_ERROR(world->Broadcast(initial_params.data(), initial_params.size(), 0)
                           .WithPrefix("sync engine: broadcasting initial parameters"));
  std::vector<int> all(static_cast<size_t>(world->size()));
  for (int r = 0; r < world->size(); ++r) all[static_cast<size_t>(r)] = r;
  STAR_ASSIGN_OR_RETURN(std::unique_ptr<Collective> p2p, world->Split(all, "engine/p2p"));
  return std::unique_ptr<SyncEngine>(new SyncEngine(std::move(world), std::move(p2p),
                                                    std::move(initial_params), optimizer,
                                                    options));
}

Status SyncEngine::Schedule(const api::Decision& d) {
  STAR_RETURN_IF_ERROR(api::Validate(d, "decision"));
  const int n = size();
  if (d.mode == api::SyncMode::kAsgd) {
    return Status::Unimplemented("decision.mode: asgd is not implemented by the sync engine");
  }
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (size_t g = 0; g < d.groups.size(); ++g) {
    for (size_t i = 0; i < d.groups[g].size(); ++i) {
      const int r = d.groups[g][i];
      if (r >= n) {
        return Status::InvalidArgument("decision.groups[" + std::to_string(g) + "][" +
                                       std::to_string(i) + "]: rank " + std::to_string(r) +
                                       " out of range for " + std::to_string(n) + " workers");
      }
      ++seen[static_cast<size_t>(r)];
    }
  }
  if (d.mode == api::SyncMode::kGroups) {
    for (int r = 0; r < n; ++r) {
      if (seen[static_cast<size_t>(r)] == 0) {
        return Status::InvalidArgument("decision.groups: rank " + std::to_string(r) +
                                       " is in no group (groups must partition all " +
                                       std::to_string(n) + " workers)");
      }
    }
  }
  if (d.mode == api::SyncMode::kFixedK && d.k > n) {
    return Status::InvalidArgument("decision.k: must be <= " + std::to_string(n) +
                                   " workers, got " + std::to_string(d.k));
  }
  if (d.apply_at_iteration < iteration_) {
    return Status::FailedPrecondition(
        "decision.apply_at_iteration: " + std::to_string(d.apply_at_iteration) +
        " already passed on rank " + std::to_string(rank()) + " (at iteration " +
        std::to_string(iteration_) + ")");
  }
  return internal::AddPending(pending_, d);
}

StatusOr<StepStats> SyncEngine::Step(std::span<const float> local_grad_sum, int64_t local_batch) {
  if (!failed_.ok()) {
    return Status::FailedPrecondition("sync engine failed earlier: " + failed_.ToString());
  }
  if (local_grad_sum.size() != params_.size()) {
    return Status::InvalidArgument("local_grad_sum: size " + std::to_string(local_grad_sum.size()) +
                                   ", expected " + std::to_string(params_.size()));
  }
  if (local_batch < 1) {
    return Status::InvalidArgument("local_batch: must be >= 1, got " + std::to_string(local_batch));
  }
  StatusOr<StepStats> result = StepImpl(local_grad_sum, local_batch);
  if (!result.ok()) failed_ = result.status();
  return result;
}

namespace {

// Removes and returns the decision scheduled at `iteration`, if any.
std::optional<api::Decision> TakePending(std::map<int64_t, api::Decision>& pending,
                                         int64_t iteration) {
  auto it = pending.find(iteration);
  if (it == pending.end()) return std::nullopt;
  std::optional<api::Decision> d = it->second;
  pending.erase(it);
  return d;
}

// buf = [grad (P), batch, 1] plus what was carried over a switch (then cleared). Reuses
// buf's storage.
void PackStep(std::span<const float> grad, int64_t batch, std::vector<float>& carry,
              std::vector<float>& buf) {
  const size_t p = grad.size();
  buf.resize(p + 2);
  std::copy(grad.begin(), grad.end(), buf.begin());
  buf[p] = static_cast<float>(batch);
  buf[p + 1] = 1.0f;
  if (!carry.empty()) {
    for (size_t i = 0; i < p + 2; ++i) buf[i] += carry[i];
    carry.clear();
  }
}

// [params (P), iteration high, iteration low, switch flag 0]: the fixed-k parent's reply.
std::vector<float> ParamsMessage(const std::vector<float>& params, int64_t iteration) {
  const size_t p = params.size();
  std::vector<float> msg(p + 3);
  std::copy(params.begin(), params.end(), msg.begin());
  msg[p] = static_cast<float>(iteration / kHalf);
  msg[p + 1] = static_cast<float>(iteration % kHalf);
  return msg;
}

// Reads a ParamsMessage into `params` and `iteration`; returns its switch flag.
bool UnpackParams(const std::vector<float>& msg, std::vector<float>& params, int64_t& iteration) {
  const size_t p = params.size();
  std::copy(msg.begin(), msg.begin() + static_cast<std::ptrdiff_t>(p), params.begin());
  iteration = static_cast<int64_t>(msg[p]) * kHalf + static_cast<int64_t>(msg[p + 1]);
  return msg[p + 2] != 0.0f;
}

// fixed_k parent: adds the children's gradients that arrived to buf and returns their
// indices (none without an inbox), or the receiver's error.
template <typename Inbox>
StatusOr<std::vector<int>> DrainArrivals(Inbox* inbox, std::vector<float>& buf) {
  std::vector<int> contributors;  // child indices
  if (inbox == nullptr) return contributors;
  std::lock_guard<std::mutex> lock(inbox->mu);
  if (!inbox->error.ok()) return inbox->error;
  for (auto& [child, msg] : inbox->arrivals) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] += msg[i];
    contributors.push_back(child);
  }
  inbox->arrivals.clear();
  return contributors;
}

// Sums buf over the step's group (the world in ssgd, else the local group if any). A
// barrier first, so waiting on slower peers is measured as wait and the all-reduce
// after it as communication (without it a fast worker's all-reduce time includes the
// wait, and every worker of a synchronous job looks as slow as its slowest).
Status SumOverGroup(api::SyncMode mode, Collective& world, Collective* local,
                    bool measure_wait, std::vector<float>& buf, StepStats& stats) {
  Collective* sync_group = mode == api::SyncMode::kSsgd ? &world : local;
  if (measure_wait && sync_group != nullptr && sync_group->size() > 1) {
    const Clock::time_point tw = Clock::now();
    STAR_RETURN_IF_ERROR(sync_group->Barrier().WithPrefix(
        std::string(api::ToString(mode)) + " arrival barrier"));
    stats.wait_seconds += Since(tw);
  }
  const Clock::time_point t0 = Clock::now();
  if (mode == api::SyncMode::kSsgd) {
    STAR_RETURN_IF_ERROR(world.AllReduceSum(buf.data(), buf.size()).WithPrefix("ssgd all-reduce"));
  } else if (local != nullptr) {
    STAR_RETURN_IF_ERROR(local->AllReduceSum(buf.data(), buf.size())
                             .WithPrefix(std::string(api::ToString(mode)) + " all-reduce"));
  }
  stats.communication_seconds += Since(t0);
  return Status::Ok();
}

// fixed_k parent: sends `msg` (a ParamsMessage) to each contributing child, first
// marking its gradient as answered.
template <typename Inbox>
Status ReplyToChildren(Inbox& inbox, Collective& world, const std::vector<int>& contributors,
                       const std::vector<float>& msg) {
  for (int c : contributors) {
    {
      std::lock_guard<std::mutex> lock(inbox.mu);
      inbox.received[static_cast<size_t>(c)] = false;
      inbox.cv.notify_all();
    }
    STAR_RETURN_IF_ERROR(world.Send(msg.data(), msg.size(), inbox.children[static_cast<size_t>(c)],
                                    kParamsTag)
                             .WithPrefix("fixed_k parent sending parameters"));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<StepStats> SyncEngine::StepImpl(std::span<const float> grad, int64_t batch) {
  StepStats stats;
  const size_t p = params_.size();
  if (!is_child()) {
    if (const std::optional<api::Decision> d = TakePending(pending_, iteration_)) {
      STAR_RETURN_IF_ERROR(ApplyDecision(&*d, stats));
    }
  }
  // [gradient sum (P), batch, gradients summed]; reused across steps (no page faults).
  std::vector<float>& buf = step_buf_;
  PackStep(grad, batch, carry_, buf);

  if (is_child()) {
    Clock::time_point t0 = Clock::now();
    STAR_RETURN_IF_ERROR(p2p_->Send(buf.data(), buf.size(), parent_, kGradTag)
                             .WithPrefix("fixed_k child sending gradient"));
    stats.communication_seconds += Since(t0);
    t0 = Clock::now();
    std::vector<float> msg(p + 3);
    STAR_RETURN_IF_ERROR(world_->Recv(msg.data(), msg.size(), parent_, kParamsTag)
                             .WithPrefix("fixed_k child waiting for parameters"));
    stats.wait_seconds += Since(t0);
    if (UnpackParams(msg, params_, iteration_)) {
      // The parent switched at iteration_: so must this worker.
      const std::optional<api::Decision> d = TakePending(pending_, iteration_);
      STAR_RETURN_IF_ERROR(ApplyDecision(d ? &*d : nullptr, stats));
    } else if (!pending_.empty() && pending_.begin()->first < iteration_) {
      return Status::FailedPrecondition(
          "fixed_k child: parent passed iteration " + std::to_string(pending_.begin()->first) +
          " without applying the decision scheduled there");
    }
    stats.iteration = iteration_;
    return stats;
  }

  STAR_ASSIGN_OR_RETURN(const std::vector<int> contributors, DrainArrivals(inbox_.get(), buf));
  STAR_RETURN_IF_ERROR(
      SumOverGroup(mode_, *world_, local_.get(), options_.measure_wait, buf, stats));
  Update(buf, stats);
  ++iteration_;

  if (!contributors.empty()) {
    const Clock::time_point t1 = Clock::now();
    STAR_RETURN_IF_ERROR(
        ReplyToChildren(*inbox_, *world_, contributors, ParamsMessage(params_, iteration_)));
    stats.communication_seconds += Since(t1);
  }
  stats.iteration = iteration_;
  return stats;
}

void SyncEngine::Update(const std::vector<float>& buf, StepStats& stats) {
  const size_t p = params_.size();
  const float batch = buf[p];
  stats.updated = true;
  stats.update_batch = static_cast<int64_t>(batch);
  stats.contributions = static_cast<int>(buf[p + 1]);
  const float inv_batch = 1.0f / batch;
  // |g|^2 in float lanes per block (vectorizes), blocks summed in double.
  constexpr size_t kBlock = 4096, kLanes = 8;
  double sq = 0;
  for (size_t start = 0; start < p; start += kBlock) {
    const size_t end = std::min(p, start + kBlock);
    float lanes[kLanes] = {};
    size_t i = start;
    for (; i + kLanes <= end; i += kLanes) {
      for (size_t l = 0; l < kLanes; ++l) {
        const float g = buf[i + l] * inv_batch;
        lanes[l] += g * g;
      }
    }
    for (; i < end; ++i) lanes[0] += (buf[i] * inv_batch) * (buf[i] * inv_batch);
    for (float v : lanes) sq += v;
  }
  stats.update_grad_sq_norm = sq;
  const float lr = optimizer_.lr, wd = optimizer_.weight_decay, mu = optimizer_.momentum;
  if (mu > 0) {
    for (size_t i = 0; i < p; ++i) {
      velocity_[i] = mu * velocity_[i] + (buf[i] * inv_batch + wd * params_[i]);
      params_[i] -= lr * velocity_[i];
    }
  } else {
    for (size_t i = 0; i < p; ++i) params_[i] -= lr * (buf[i] * inv_batch + wd * params_[i]);
  }
}

Status SyncEngine::ApplyDecision(const api::Decision* d, StepStats& stats) {
  const Clock::time_point t0 = Clock::now();
  const api::SyncMode old_mode = mode_;
  if (mode_ == api::SyncMode::kFixedK && inbox_ != nullptr) {
    STAR_RETURN_IF_ERROR(FinishFixedKAsParent(stats));
  }
  STAR_RETURN_IF_ERROR(CheckConsistent(d));
  if (d == nullptr) {
    return Status::Internal("sync engine: switch without a decision passed the check");
  }
  STAR_RETURN_IF_ERROR(Reconcile(old_mode));
  std::fill(velocity_.begin(), velocity_.end(), 0.0f);
  STAR_RETURN_IF_ERROR(SetUp(*d));
  ++switches_;
  stats.switch_seconds += Since(t0);
  return Status::Ok();
}

Status SyncEngine::FinishFixedKAsParent(StepStats& stats) {
  const size_t p = params_.size();
  if (carry_.empty()) carry_.assign(p + 2, 0.0f);
  {
    const Clock::time_point t0 = Clock::now();
    std::unique_lock<std::mutex> lock(inbox_->mu);
    const bool all = inbox_->cv.wait_for(lock, options_.timeout, [&] {
      return !inbox_->error.ok() || !inbox_->AnyAwaited();
    });
    stats.wait_seconds += Since(t0);
    if (!inbox_->error.ok()) return inbox_->error;
    if (!all) {
      return Status::DeadlineExceeded("fixed_k parent rank " + std::to_string(rank()) +
                                      ": children's last gradients did not arrive within " +
                                      std::to_string(options_.timeout.count()) + " ms");
    }
    for (auto& [child, msg] : inbox_->arrivals) {
      for (size_t i = 0; i < p + 2; ++i) carry_[i] += msg[i];
    }
    inbox_->arrivals.clear();
  }
  const std::vector<int> children = inbox_->children;
  StopInbox();
  std::vector<float> msg(p + 3);
  std::copy(params_.begin(), params_.end(), msg.begin());
  msg[p] = static_cast<float>(iteration_ / kHalf);
  msg[p + 1] = static_cast<float>(iteration_ % kHalf);
  msg[p + 2] = 1.0f;  // switch now
  for (int c : children) {
    STAR_RETURN_IF_ERROR(world_->Send(msg.data(), msg.size(), c, kParamsTag)
                             .WithPrefix("fixed_k parent telling child to switch"));
  }
  return Status::Ok();
}

Status SyncEngine::CheckConsistent(const api::Decision* d) {
  const int n = size();
  const std::vector<float> mine = CheckMessage(d, iteration_);
  const std::string where = "decision check at iteration " + std::to_string(iteration_);
  if (n == 1) return Status::Ok();
  if (rank() != 0) {
    STAR_RETURN_IF_ERROR(world_->Send(mine.data(), mine.size(), 0, kCheckTag).WithPrefix(where));
    float verdict = 0;
    STAR_RETURN_IF_ERROR(world_->Recv(&verdict, 1, 0, kVerdictTag).WithPrefix(where));
    if (verdict != 1.0f) {
      return Status::Aborted(where + ": rank 0 found workers applying different decisions");
    }
    return Status::Ok();
  }
  std::vector<int> remaining;
  for (int r = 1; r < n; ++r) remaining.push_back(r);
  std::vector<int> heard;
  std::string mismatched;
  Status error;
  std::vector<float> theirs(kCheckSize);
  while (!remaining.empty()) {
    StatusOr<int> from = world_->RecvFromAny(theirs.data(), theirs.size(), remaining, kCheckTag);
    if (!from.ok()) {
      error = from.status().WithPrefix(where);
      break;
    }
    heard.push_back(*from);
    remaining.erase(std::find(remaining.begin(), remaining.end(), *from));
    if (theirs != mine) mismatched += " " + std::to_string(*from);
  }
  const float verdict = (error.ok() && mismatched.empty()) ? 1.0f : 0.0f;
  for (int r : heard) {
    Status s = world_->Send(&verdict, 1, r, kVerdictTag);
    if (error.ok() && !s.ok()) error = s.WithPrefix(where);
  }
  STAR_RETURN_IF_ERROR(error);
  if (!mismatched.empty()) {
    return Status::Aborted(where + ": rank(s)" + mismatched +
                           " apply a different decision (or none) than rank 0");
  }
  return Status::Ok();
}

Status SyncEngine::Reconcile(api::SyncMode old_mode) {
  if (old_mode == api::SyncMode::kGroups) {
    STAR_RETURN_IF_ERROR(world_->AllReduceSum(params_.data(), params_.size())
                             .WithPrefix("averaging group parameters"));
    const float inv = 1.0f / static_cast<float>(size());
    for (float& x : params_) x *= inv;
    return Status::Ok();
  }
  return world_->Broadcast(params_.data(), params_.size(), 0)
      .WithPrefix("broadcasting parameters at a switch");
}

Status SyncEngine::SetUp(const api::Decision& d) {
  local_.reset();
  parent_ = -1;
  children_.clear();
  mode_ = d.mode;
  const int me = rank();
  const std::string name = "engine/s" + std::to_string(switches_);
  if (d.mode == api::SyncMode::kGroups) {
    for (size_t g = 0; g < d.groups.size(); ++g) {
      std::vector<int> members = d.groups[g];
      if (std::find(members.begin(), members.end(), me) == members.end()) continue;
      std::sort(members.begin(), members.end());
      if (members.size() > 1) {
        STAR_ASSIGN_OR_RETURN(local_, world_->Split(members, name + "/g" + std::to_string(g)));
      }
    }
    return Status::Ok();
  }
  if (d.mode != api::SyncMode::kFixedK) return Status::Ok();
  const std::vector<int> order = FixedKOrder(d, size());
  const size_t k = static_cast<size_t>(d.k);
  const size_t pos =
      static_cast<size_t>(std::find(order.begin(), order.end(), me) - order.begin());
  if (pos >= k) {
    parent_ = order[(pos - k) % k];
    return Status::Ok();
  }
  for (size_t j = 0; k + j < order.size(); ++j) {
    if (j % k == pos) children_.push_back(order[k + j]);
  }
  std::vector<int> ring(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
  std::sort(ring.begin(), ring.end());
  if (ring.size() > 1) {
    STAR_ASSIGN_OR_RETURN(local_, world_->Split(ring, name + "/ring"));
  }
  if (!children_.empty()) {
    inbox_ = std::make_unique<ChildInbox>();
    inbox_->children = children_;
    inbox_->received.assign(children_.size(), false);
    inbox_->thread = std::thread(&ChildInbox::Run, inbox_.get(), p2p_.get(), params_.size() + 2);
  }
  return Status::Ok();
}

void SyncEngine::StopInbox() {
  if (inbox_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(inbox_->mu);
    inbox_->stop = true;
    inbox_->cv.notify_all();
  }
  if (inbox_->thread.joinable()) inbox_->thread.join();
  inbox_.reset();
}

}  // namespace star::shim
