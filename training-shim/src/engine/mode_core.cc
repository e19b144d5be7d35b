#include "engine/mode_core.h"

#include "engine/pending_decisions.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

namespace star::shim::internal {
namespace {

// Point-to-point tags of the engine ("SE" + kind).
constexpr uint32_t kGradTag = 0x53450001;     // child -> parent on p2p: [grad G, batch, count]
constexpr uint32_t kStateTag = 0x53450002;    // parent -> child on world: [state S, iter x2, flag]
constexpr uint32_t kCheckTag = 0x53450003;    // rank r -> 0 on world: CheckMessage
constexpr uint32_t kVerdictTag = 0x53450004;  // rank 0 -> r on world: [ok]
constexpr uint32_t kMergeTag = 0x53450005;    // groups leader -> leader on signal: [1]

// State message flags.
constexpr float kRound = 0.0f;
constexpr float kSwitch = 1.0f;
constexpr float kFinished = 2.0f;

// Integers travel as floats in 20-bit halves so they stay exact.
constexpr int64_t kHalf = int64_t{1} << 20;
// The largest iteration the engine schedules a decision at (its messages carry an
// iteration as two floats of 20 bits each; the operator issues none past it either).
constexpr int64_t kMaxIteration = kHalf * kHalf;

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

// The fixed-k order of ranks, fastest first (sync_engine.h's convention).
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

// The lowest rank of `rank`'s group in a groups decision (the rank itself if in none).
int GroupLeader(const api::Decision& d, int rank) {
  for (const auto& group : d.groups) {
    if (std::find(group.begin(), group.end(), rank) != group.end()) {
      return *std::min_element(group.begin(), group.end());
    }
  }
  return rank;
}

// Removes and returns the decision scheduled at `iteration`, if any.
std::optional<api::Decision> TakePending(std::map<int64_t, api::Decision>& pending,
                                         int64_t iteration) {
  auto it = pending.find(iteration);
  if (it == pending.end()) return std::nullopt;
  std::optional<api::Decision> d = it->second;
  pending.erase(it);
  return d;
}

// Validates a decision's ranks for `n` workers (SyncEngine::Schedule's InvalidArgument).
Status CheckDecisionRanks(const api::Decision& d, int n) {
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
  return Status::Ok();
}

// Adds a group's link sample to the step's, its peer renumbered to a world rank through
// `members` (the group's world ranks; empty for the world itself).
void AddLink(std::span<const int> members, const std::optional<LinkSample>& sample,
             StepStats& stats) {
  if (!sample) return;
  const int peer = members.empty() ? sample->peer : members[static_cast<size_t>(sample->peer)];
  if (!stats.link) stats.link = LinkSample{peer, 0, 0};
  stats.link->seconds += sample->seconds;
  stats.link->bytes += sample->bytes;
}

// Sums buf over the mode's group (the world in ssgd, else the local group if any). A
// barrier first, so waiting on slower peers is measured as wait and the all-reduce after
// it as communication (without it a fast worker's all-reduce time includes the wait, and
// every worker of a synchronous job looks as slow as its slowest).
// With `barrier` false only the all-reduce runs (a later part of the same iteration).
Status SumOverGroup(api::SyncMode mode, Collective& world, Collective* local,
                    std::span<const int> local_members, bool barrier, std::span<float> buf,
                    StepStats& stats) {
  Collective* sync_group = mode == api::SyncMode::kSsgd ? &world : local;
  if (barrier && sync_group != nullptr && sync_group->size() > 1) {
    const Clock::time_point tw = Clock::now();
    STAR_RETURN_IF_ERROR(sync_group->Barrier().WithPrefix(
        std::string(api::ToString(mode)) + " arrival barrier"));
    stats.wait_seconds += Since(tw);
  }
  const Clock::time_point t0 = Clock::now();
  if (sync_group != nullptr) {
    STAR_RETURN_IF_ERROR(sync_group->AllReduceSum(buf.data(), buf.size())
                             .WithPrefix(std::string(api::ToString(mode)) + " all-reduce"));
    AddLink(sync_group == &world ? std::span<const int>() : local_members,
            sync_group->TakeLinkSample(), stats);
  }
  stats.communication_seconds += Since(t0);
  return Status::Ok();
}

}  // namespace

double MeanSquaredNorm(const std::vector<float>& buf, size_t p) {
  const float inv_batch = 1.0f / buf[p];
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
  return sq;
}

// Fixed-k parent: a thread receives child gradients on the p2p communicator (which only it
// uses while it runs) whenever some child has no gradient waiting; the main thread takes
// the arrivals each round.
struct ModeCore::ChildInbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> children;
  std::vector<bool> received;  // by index in children: a gradient is waiting for its reply
  std::vector<bool> left;      // by index in children: the child finished (sends no more)
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
      if (buf.back() < 0) {
        left[i] = true;  // a finished child's farewell: no gradient, no answer
      } else {
        arrivals.emplace_back(static_cast<int>(i), buf);
      }
      cv.notify_all();
    }
  }

  // Adds the arrivals to buf; returns their child indices (or the receiver's error).
  StatusOr<std::vector<int>> Drain(std::vector<float>& buf) {
    std::vector<int> contributors;
    std::lock_guard<std::mutex> lock(mu);
    if (!error.ok()) return error;
    for (auto& [child, msg] : arrivals) {
      for (size_t i = 0; i < buf.size(); ++i) buf[i] += msg[i];
      contributors.push_back(child);
    }
    arrivals.clear();
    return contributors;
  }

  // Marks child index c as awaited again (its gradient is being answered).
  void Rearm(int c) {
    std::lock_guard<std::mutex> lock(mu);
    received[static_cast<size_t>(c)] = false;
    cv.notify_all();
  }
};

ModeCore::ModeCore(std::unique_ptr<Collective> world, std::unique_ptr<Collective> p2p,
                   std::unique_ptr<Collective> signal, size_t state_size, size_t grad_size,
                   EngineOptions options)
    : world_(std::move(world)),
      p2p_(std::move(p2p)),
      signal_(std::move(signal)),
      state_size_(state_size),
      grad_size_(grad_size),
      options_(options) {}

ModeCore::~ModeCore() {
  StopInbox();
  merges_.reset();
}

StatusOr<std::unique_ptr<ModeCore>> ModeCore::Create(std::unique_ptr<Collective> world,
                                                     size_t state_size, size_t grad_size,
                                                     EngineOptions options) {
  if (world == nullptr) return Status::InvalidArgument("world: must not be null");
  if (grad_size == 0) return Status::InvalidArgument("gradient size: must be >= 1");
  if (state_size < grad_size) {
    return Status::InvalidArgument("state size: must be >= the gradient size (" +
                                   std::to_string(grad_size) + "), got " +
                                   std::to_string(state_size));
  }
  if (options.timeout.count() <= 0) {
    return Status::InvalidArgument("options.timeout: must be > 0");
  }
  std::vector<int> all(static_cast<size_t>(world->size()));
  for (int r = 0; r < world->size(); ++r) all[static_cast<size_t>(r)] = r;
  STAR_ASSIGN_OR_RETURN(std::unique_ptr<Collective> p2p, world->Split(all, "engine/p2p"));
  STAR_ASSIGN_OR_RETURN(std::unique_ptr<Collective> signal, world->Split(all, "engine/signal"));
  return std::unique_ptr<ModeCore>(new ModeCore(std::move(world), std::move(p2p), std::move(signal),
                                                state_size, grad_size, options));
}

Status ModeCore::CheckUsable() const {
  if (failed_.ok()) return Status::Ok();
  return Status::FailedPrecondition("sync engine failed earlier: " + failed_.ToString());
}

Status ModeCore::BroadcastState(std::span<float> state) {
  return world_->Broadcast(state.data(), state.size(), 0)
      .WithPrefix("sync engine: broadcasting initial parameters");
}

Status ModeCore::Schedule(const api::Decision& d) {
  STAR_RETURN_IF_ERROR(api::Validate(d, "decision"));
  if (d.mode == api::SyncMode::kAsgd) {
    return Status::Unimplemented("decision.mode: asgd is not implemented by the sync engine");
  }
  STAR_RETURN_IF_ERROR(CheckDecisionRanks(d, size()));
  if (d.apply_at_iteration > kMaxIteration) {
    return Status::InvalidArgument("decision.apply_at_iteration: must be at most " + std::to_string(kMaxIteration) +
                                   " (what the engine's messages carry), got " +
                                   std::to_string(d.apply_at_iteration));
  }
  if (d.apply_at_iteration < iteration_) {
    return Status::FailedPrecondition(
        "decision.apply_at_iteration: " + std::to_string(d.apply_at_iteration) +
        " already passed on rank " + std::to_string(rank()) + " (at iteration " +
        std::to_string(iteration_) + ")");
  }
  STAR_RETURN_IF_ERROR(AddPending(pending_, d));
  ListenForMerges();
  return Status::Ok();
}

Status ModeCore::ApplyDue(std::span<float> state, StepStats& stats, bool* switched) {
  if (is_child() || finished_) return Status::Ok();
  if (in_force_.mode == api::SyncMode::kGroups) {
    // Leaving groups: at the exit's iteration, or at the first boundary after the group
    // learned that another group reached it (the fast group does not wait for the slow
    // one to run up to that iteration number).
    const std::optional<int64_t> exit = PendingExit();
    if (exit && (*exit == iteration_ || merge_now_)) {
      STAR_RETURN_IF_ERROR(MergeGroups(*exit, state, stats));
      if (switched != nullptr) *switched = true;
      return Status::Ok();
    }
  }
  const std::optional<api::Decision> d = TakePending(pending_, iteration_);
  if (!d || api::SameSynchronization(*d, in_force_)) return Status::Ok();  // batches/AMP only
  STAR_RETURN_IF_ERROR(ApplyDecision(&*d, state, stats));
  if (switched != nullptr) *switched = true;
  return Status::Ok();
}

Status ModeCore::Exchange(std::span<const float> grad, float grad_scale, int64_t batch,
                          StepStats& stats) {
  const size_t g = grad_size_;
  const bool groups = in_force_.mode == api::SyncMode::kGroups;
  buf_.resize(g + (groups ? 4 : 2));
  for (size_t i = 0; i < g; ++i) buf_[i] = grad[i] * grad_scale;
  buf_[g] = static_cast<float>(batch);
  buf_[g + 1] = 1.0f;
  if (groups) FillMergeTrailer(&buf_[g + 2]);
  if (!carry_.empty()) {
    for (size_t i = 0; i < g + 2; ++i) buf_[i] += carry_[i];
    carry_.clear();
  }
  if (finished_ || parent_finished_) return Status::Ok();
  if (is_child()) {
    const Clock::time_point t0 = Clock::now();
    STAR_RETURN_IF_ERROR(p2p_->Send(buf_.data(), buf_.size(), parent_, kGradTag)
                             .WithPrefix("fixed_k child sending gradient"));
    stats.communication_seconds += Since(t0);
    awaiting_parent_ = true;
    return Status::Ok();
  }
  if (inbox_ != nullptr) {
    STAR_ASSIGN_OR_RETURN(contributors_, inbox_->Drain(buf_));
  }
  STAR_RETURN_IF_ERROR(
      SumOverGroup(in_force_.mode, *world_, local_.get(), local_members_, options_.measure_wait,
                   buf_, stats));
  if (groups) ReadMergeTrailer(&buf_[g + 2]);
  ++iteration_;
  stats.iteration = iteration_;
  return Status::Ok();
}

Status ModeCore::ExchangePart(std::span<float> part, float grad_scale, int64_t batch,
                              bool first, bool last, StepStats& stats) {
  if (!PartsSupported()) {
    return Status::FailedPrecondition("sync engine: a gradient in parts in fixed_k (exchange it whole)");
  }
  if (first) {
    const bool groups = in_force_.mode == api::SyncMode::kGroups;
    const size_t p = part.size();
    first_.resize(p + (groups ? 4 : 2));
    for (size_t i = 0; i < p; ++i) first_[i] = part[i] * grad_scale;
    first_[p] = static_cast<float>(batch);
    first_[p + 1] = 1.0f;
    if (groups) FillMergeTrailer(&first_[p + 2]);
    STAR_RETURN_IF_ERROR(SumOverGroup(in_force_.mode, *world_, local_.get(), local_members_,
                                      options_.measure_wait, first_, stats));
    if (groups) ReadMergeTrailer(&first_[p + 2]);
    std::copy(first_.begin(), first_.begin() + static_cast<std::ptrdiff_t>(part.size()), part.begin());
    totals_ = {first_[part.size()], first_[part.size() + 1]};
  } else {
    for (float& x : part) x *= grad_scale;
    STAR_RETURN_IF_ERROR(SumOverGroup(in_force_.mode, *world_, local_.get(), local_members_, false,
                                      part, stats));
  }
  if (last) {
    ++iteration_;
    stats.iteration = iteration_;
  }
  return Status::Ok();
}

std::vector<float> ModeCore::StateMessage(std::span<const float> state, float flag) const {
  const size_t s = state_size_;
  std::vector<float> msg(s + 3);
  std::copy(state.begin(), state.end(), msg.begin());
  msg[s] = static_cast<float>(iteration_ / kHalf);
  msg[s + 1] = static_cast<float>(iteration_ % kHalf);
  msg[s + 2] = flag;
  return msg;
}

Status ModeCore::Publish(std::span<float> state, StepStats& stats, bool* switched) {
  if (is_child()) {
    if (!awaiting_parent_) return Status::Ok();
    return ReceiveFromParent(state, stats, switched);
  }
  if (contributors_.empty()) return Status::Ok();
  const Clock::time_point t0 = Clock::now();
  const std::vector<float> msg = StateMessage(state, kRound);
  for (int c : contributors_) {
    inbox_->Rearm(c);
    STAR_RETURN_IF_ERROR(world_->Send(msg.data(), msg.size(),
                                      inbox_->children[static_cast<size_t>(c)], kStateTag)
                             .WithPrefix("fixed_k parent sending parameters"));
  }
  contributors_.clear();
  stats.communication_seconds += Since(t0);
  return Status::Ok();
}

bool ModeCore::StateNeeded() const {
  if (is_child()) return awaiting_parent_ && !parent_finished_;
  return !contributors_.empty() || (!finished_ && (pending_.count(iteration_) > 0 || merge_now_));
}

Status ModeCore::ReceiveFromParent(std::span<float> state, StepStats& stats, bool* switched) {
  const size_t s = state_size_;
  const Clock::time_point t0 = Clock::now();
  std::vector<float> msg(s + 3);
  STAR_RETURN_IF_ERROR(world_->Recv(msg.data(), msg.size(), parent_, kStateTag)
                           .WithPrefix("fixed_k child waiting for parameters"));
  stats.wait_seconds += Since(t0);
  awaiting_parent_ = false;
  std::copy(msg.begin(), msg.begin() + static_cast<std::ptrdiff_t>(s), state.begin());
  iteration_ = static_cast<int64_t>(msg[s]) * kHalf + static_cast<int64_t>(msg[s + 1]);
  stats.iteration = iteration_;
  const float flag = msg[s + 2];
  STAR_RETURN_IF_ERROR(DropPassed());
  if (flag == kFinished) {
    parent_finished_ = true;
    return Status::Ok();
  }
  if (flag == kSwitch) {
    // The parent switched at iteration_: so must this worker.
    const std::optional<api::Decision> d = TakePending(pending_, iteration_);
    STAR_RETURN_IF_ERROR(ApplyDecision(d ? &*d : nullptr, state, stats));
    if (switched != nullptr) *switched = true;
  }
  return Status::Ok();
}

Status ModeCore::DropPassed() {
  // The parent took up every decision before iteration_ without a switch: each must
  // change batches or AMP only (the parent skipped it as this worker would have).
  while (!pending_.empty() && pending_.begin()->first < iteration_) {
    if (!api::SameSynchronization(pending_.begin()->second, in_force_)) {
      return Status::FailedPrecondition(
          "fixed_k child: parent passed iteration " + std::to_string(pending_.begin()->first) +
          " without applying the decision scheduled there");
    }
    pending_.erase(pending_.begin());
  }
  return Status::Ok();
}

Status ModeCore::Finish(std::span<float> state) {
  if (finished_) return Status::Ok();
  finished_ = true;
  StepStats ignored;
  if (is_child()) {
    if (parent_finished_) return Status::Ok();
    if (awaiting_parent_) return ReceiveFromParent(state, ignored, nullptr);
    // Tells the parent this child sends no more gradients (gradients summed = -1).
    std::vector<float> farewell(grad_size_ + 2, 0.0f);
    farewell.back() = -1.0f;
    return p2p_->Send(farewell.data(), farewell.size(), parent_, kGradTag)
        .WithPrefix("fixed_k child telling its parent it finished");
  }
  if (inbox_ == nullptr) return Status::Ok();
  return AnswerChildrenLast(state, kFinished, ignored);
}

Status ModeCore::ApplyDecision(const api::Decision* d, std::span<float> state, StepStats& stats) {
  const Clock::time_point t0 = Clock::now();
  const api::SyncMode old_mode = in_force_.mode;
  if (in_force_.mode == api::SyncMode::kFixedK && inbox_ != nullptr) {
    STAR_RETURN_IF_ERROR(AnswerChildrenLast(state, kSwitch, stats));
  }
  STAR_RETURN_IF_ERROR(CheckConsistent(d));
  if (merges_ != nullptr) {
    // Every leader sent its ready message before its check: the listener has them all.
    const Status heard = merges_->Join();
    merges_.reset();
    STAR_RETURN_IF_ERROR(heard);
  }
  if (d == nullptr) {
    return Status::Internal("sync engine: switch without a decision passed the check");
  }
  STAR_RETURN_IF_ERROR(Reconcile(old_mode, state));
  STAR_RETURN_IF_ERROR(SetUp(*d));
  ++switches_;
  stats.switch_seconds += Since(t0);
  return Status::Ok();
}

Status ModeCore::AnswerChildrenLast(std::span<const float> state, float flag, StepStats& stats) {
  const size_t g = grad_size_;
  if (carry_.empty()) carry_.assign(g + 2, 0.0f);
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
      for (size_t i = 0; i < g + 2; ++i) carry_[i] += msg[i];
    }
    inbox_->arrivals.clear();
  }
  std::vector<int> children;
  for (size_t i = 0; i < inbox_->children.size(); ++i) {
    if (!inbox_->left[i]) children.push_back(inbox_->children[i]);
  }
  StopInbox();
  const std::vector<float> msg = StateMessage(state, flag);
  for (int c : children) {
    STAR_RETURN_IF_ERROR(world_->Send(msg.data(), msg.size(), c, kStateTag)
                             .WithPrefix(flag == kSwitch ? "fixed_k parent telling child to switch"
                                                         : "fixed_k parent telling child it finished"));
  }
  return Status::Ok();
}

Status ModeCore::CheckConsistent(const api::Decision* d) {
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

Status ModeCore::Reconcile(api::SyncMode old_mode, std::span<float> state) {
  if (old_mode == api::SyncMode::kGroups) {
    STAR_RETURN_IF_ERROR(world_->AllReduceSum(state.data(), state.size())
                             .WithPrefix("averaging group parameters"));
    const float inv = 1.0f / static_cast<float>(size());
    for (float& x : state) x *= inv;
    return Status::Ok();
  }
  return world_->Broadcast(state.data(), state.size(), 0)
      .WithPrefix("broadcasting parameters at a switch");
}

Status ModeCore::SetUp(const api::Decision& d) {
  local_.reset();
  local_members_.clear();
  parent_ = -1;
  awaiting_parent_ = false;
  children_.clear();
  other_leaders_.clear();
  merge_now_ = false;
  in_force_ = d;
  const int me = rank();
  const std::string name = "engine/s" + std::to_string(switches_);
  if (d.mode == api::SyncMode::kGroups) {
    for (size_t g = 0; g < d.groups.size(); ++g) {
      std::vector<int> members = d.groups[g];
      if (std::find(members.begin(), members.end(), me) == members.end()) continue;
      std::sort(members.begin(), members.end());
      if (members.size() > 1) {
        STAR_ASSIGN_OR_RETURN(local_, world_->Split(members, name + "/g" + std::to_string(g)));
        local_members_ = members;
      }
    }
    if (me == GroupLeader(d, me)) {
      for (const auto& group : d.groups) {
        const int leader = *std::min_element(group.begin(), group.end());
        if (leader != me) other_leaders_.push_back(leader);
      }
    }
    ListenForMerges();
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
    local_members_ = ring;
  }
  if (!children_.empty()) {
    inbox_ = std::make_unique<ChildInbox>();
    inbox_->children = children_;
    inbox_->received.assign(children_.size(), false);
    inbox_->left.assign(children_.size(), false);
    inbox_->thread = std::thread(&ChildInbox::Run, inbox_.get(), p2p_.get(), grad_size_ + 2);
  }
  return Status::Ok();
}

std::optional<int64_t> ModeCore::PendingExit() const {
  for (const auto& [at, d] : pending_) {
    if (!api::SameSynchronization(d, in_force_)) return at;
  }
  return std::nullopt;
}

void ModeCore::ListenForMerges() {
  if (in_force_.mode != api::SyncMode::kGroups || merges_ != nullptr || other_leaders_.empty() ||
      finished_ || !PendingExit()) {
    return;
  }
  merges_ = std::make_unique<MergeSignals>(signal_.get(), other_leaders_, kMergeTag);
}

void ModeCore::FillMergeTrailer(float* trailer) const {
  trailer[0] = merges_ != nullptr && merges_->heard() ? 1.0f : 0.0f;
  trailer[1] = PendingExit() ? 1.0f : 0.0f;
}

void ModeCore::ReadMergeTrailer(const float* trailer) {
  // Merge once a leader heard of it and every member knows the exit decision.
  const float members = local_ != nullptr ? static_cast<float>(local_->size()) : 1.0f;
  merge_now_ = trailer[0] > 0.0f && trailer[1] == members;
}

Status ModeCore::MergeGroups(int64_t at, std::span<float> state, StepStats& stats) {
  if (merges_ != nullptr) STAR_RETURN_IF_ERROR(merges_->SendReady());
  iteration_ = at;
  stats.iteration = at;
  const std::optional<api::Decision> d = TakePending(pending_, at);
  // The decisions before `at` change batches or AMP only (`at` is the first exit): the
  // groups that merge early skip them, as a fixed-k child skips what its parent passed.
  pending_.erase(pending_.begin(), pending_.lower_bound(at));
  merge_now_ = false;
  return ApplyDecision(d ? &*d : nullptr, state, stats);
}

void ModeCore::StopInbox() {
  if (inbox_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(inbox_->mu);
    inbox_->stop = true;
    inbox_->cv.notify_all();
  }
  if (inbox_->thread.joinable()) inbox_->thread.join();
  inbox_.reset();
}

}  // namespace star::shim::internal
