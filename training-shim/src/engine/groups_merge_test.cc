// Leaving groups does not stall: when one group reaches the exit decision's iteration,
// the others merge at their next iteration boundary instead of running on to that
// iteration number (the fast group waits about one of the slow group's iterations).
#include <gtest/gtest.h>

#include "engine/engine_test_support.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "star/shim/gradient_engine.h"
#include "star/shim/local_collective.h"
#include "star/shim/sync_engine.h"

namespace star::shim {
namespace {

using std::chrono::milliseconds;
using testing_support::ExpectAllOk;
using testing_support::MakeDecision;
using testing_support::RunRanks;

constexpr uint32_t kMergeTag = 0x53450005;  // mode_core.cc's groups leaders' merge message

// Forwards to `inner` (and wraps its splits); calls `on_listen` when a receive of merge
// messages begins. The second begins after the listener recorded the first message: the
// test opens the slow group's gate there, once its leader has certainly heard.
class Observed final : public Collective {
 public:
  Observed(std::unique_ptr<Collective> inner, std::function<void()> on_listen)
      : inner_(std::move(inner)), on_listen_(std::move(on_listen)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status AllReduceSum(float* d, size_t n) override { return inner_->AllReduceSum(d, n); }
  Status Broadcast(float* d, size_t n, int root) override { return inner_->Broadcast(d, n, root); }
  Status Send(const float* d, size_t n, int peer, uint32_t tag) override { return inner_->Send(d, n, peer, tag); }
  Status Recv(float* d, size_t n, int peer, uint32_t tag) override { return inner_->Recv(d, n, peer, tag); }
  StatusOr<int> RecvFromAny(float* d, size_t n, const std::vector<int>& peers, uint32_t tag) override {
    if (tag == kMergeTag) on_listen_();
    return inner_->RecvFromAny(d, n, peers, tag);
  }
  Status Barrier() override { return inner_->Barrier(); }
  StatusOr<std::unique_ptr<Collective>> Split(const std::vector<int>& members, const std::string& name) override {
    STAR_ASSIGN_OR_RETURN(auto child, inner_->Split(members, name));
    return std::unique_ptr<Collective>(new Observed(std::move(child), on_listen_));
  }

 private:
  std::unique_ptr<Collective> inner_;
  std::function<void()> on_listen_;
};

// Groups {0,1}, {4} (fast) and {2,3} (slow) from iteration 1, back to ssgd at iteration
// 60. The slow group stops after 3 iterations until its leader heard that a fast group
// reached 60 (and waits there); it then merges at its next boundary, not after the 57
// iterations it would take to reach 60; every worker goes on from iteration 60 with the
// same state.
TEST(GroupsMerge, ASlowGroupMergesAtItsNextBoundaryNotAtTheFarIteration) {
  constexpr int n = 5;
  constexpr int64_t kExit = 60, kGate = 3, kEnd = kExit + 3;
  int listens = 0;  // rank 2's receives of merge messages begun
  std::mutex mu;
  std::condition_variable cv;
  bool heard = false;
  std::atomic<int> slow_in_groups{0};  // rank 2's iterations in groups
  std::vector<int64_t> merged_at(n, -1), last(n, -1);
  std::vector<std::vector<float>> finals(n);
  const auto on_listen = [&] {
    std::lock_guard<std::mutex> lock(mu);
    if (++listens == 2) heard = true;
    cv.notify_all();
  };
  ExpectAllOk(RunRanks(n, milliseconds(10000), [&](int r, std::unique_ptr<Collective> world) -> Status {
    if (r == 2) world = std::make_unique<Observed>(std::move(world), on_listen);
    std::vector<float> state(2, 0.0f);
    STAR_ASSIGN_OR_RETURN(auto engine, GradientEngine::Create(std::move(world), state, 1));
    STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(1, 1, api::SyncMode::kGroups, 1, {{0, 1}, {2, 3}, {4}})));
    STAR_RETURN_IF_ERROR(engine->Schedule(MakeDecision(2, kExit, api::SyncMode::kSsgd, n)));
    const bool slow = r == 2 || r == 3;
    for (int s = 0; s < 200 && engine->iteration() < kEnd; ++s) {
      if (slow && engine->iteration() == kGate && engine->mode() == api::SyncMode::kGroups) {
        std::unique_lock<std::mutex> lock(mu);
        if (!cv.wait_for(lock, milliseconds(10000), [&] { return heard; })) {
          return Status::DeadlineExceeded("the fast group's merge message never came");
        }
      }
      const bool before = engine->mode() == api::SyncMode::kGroups;
      STAR_ASSIGN_OR_RETURN(BeginStats b, engine->BeginIteration(state));
      if (b.switched && before) merged_at[static_cast<size_t>(r)] = b.iteration;
      if (r == 2 && engine->mode() == api::SyncMode::kGroups) ++slow_in_groups;
      state[1] = static_cast<float>(r);  // a buffer of each worker's own
      std::vector<float> g = {static_cast<float>(r + 1)};
      STAR_RETURN_IF_ERROR(engine->Exchange(g, 1, g).status());
      state[0] -= 0.01f * g[0];
    }
    last[static_cast<size_t>(r)] = engine->iteration();
    finals[static_cast<size_t>(r)] = state;
    return engine->Finish(state);
  }));
  for (size_t r = 0; r < n; ++r) {
    EXPECT_EQ(merged_at[r], kExit) << "rank " << r << " merged at iteration " << merged_at[r];
    EXPECT_EQ(last[r], kEnd) << "rank " << r;
    EXPECT_FLOAT_EQ(finals[r][0], finals[0][0]) << "rank " << r;
  }
  // Iterations 1 and 2 before the gate, and at most the one after it (the leader heard
  // before the gate opened: the group agrees at its next all-reduce and merges at the
  // boundary after it); reaching 60 would take 59.
  EXPECT_GE(slow_in_groups.load(), 1);
  EXPECT_LE(slow_in_groups.load(), kGate);
}

}  // namespace
}  // namespace star::shim
