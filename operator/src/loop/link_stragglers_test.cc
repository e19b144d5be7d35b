// The loop on a ring all-reduce whose reports carry link readings (api::LinkReading):
// every worker reports the slowest link's communication time, and the loop names the
// worker the slow link belongs to.
#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "star/operator/control_loop.h"

namespace star::op {
namespace {

constexpr int kRing = 6;
constexpr double kCompute = 0.05;  // seconds per iteration
constexpr double kHop = 0.002;     // a clean link's fastest hop
constexpr int64_t kBytes = 100000;

api::TrainingJobSpec Spec() {
  api::TrainingJobSpec s;
  s.workers.replicas = kRing;
  s.training.global_batch_size = 64 * kRing;
  s.synchronization.policy = api::SyncPolicy::kAuto;
  s.mitigation.detection.window = 10;
  s.mitigation.resource_reallocation.enabled = true;
  return s;
}

// hop(sender, iteration): the fastest hop of the link out of `sender`.
using Hop = std::function<double(int sender, int64_t i)>;

// One report per worker per iteration, ring order 0 -> 1 -> ... -> 0: compute with 3%
// noise, communication 2 (n - 1) times the slowest link's hop (the ring waits on it),
// and the link from the predecessor.
// `after` (if set) runs after each iteration's reports, as a runtime acting on them would.
void RunRing(JobControlLoop& loop, int64_t iterations, const Hop& hop, uint64_t seed = 3,
             const std::function<void(int64_t)>& after = nullptr) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> noise(0.0, 0.03);
  for (int64_t i = 1; i <= iterations; ++i) {
    if (after && i > 1) after(i - 1);
    std::vector<double> hops(kRing);
    for (int s = 0; s < kRing; ++s) hops[static_cast<size_t>(s)] = hop(s, i) * noise(rng);
    const double ring = 2 * (kRing - 1) * *std::max_element(hops.begin(), hops.end());
    for (int w = 0; w < kRing; ++w) {
      api::WorkerReport r;
      r.worker = w;
      r.iteration = i;
      r.time_seconds = static_cast<double>(i) * 0.1;
      r.local_batch = 64;
      r.compute_seconds = kCompute * noise(rng);
      r.communication_seconds = ring;
      const int prev = (w + kRing - 1) % kRing;
      r.link = api::LinkReading{prev, hops[static_cast<size_t>(prev)], kBytes};
      ASSERT_TRUE(loop.Observe(r).ok());
    }
  }
}

std::vector<const TimelineEvent*> Stragglers(const JobControlLoop& loop) {
  std::vector<const TimelineEvent*> out;
  for (const TimelineEvent& e : loop.timeline()) {
    if (EventName(e.kind) == std::string("straggler")) out.push_back(&e);
  }
  return out;
}

TEST(LinkStragglers, ACleanRingFlagsNobody) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  // Links up to 1.3x apart, as uneven NICs are.
  RunRing(*loop, 300, [](int s, int64_t) { return kHop * (1 + 0.06 * s); });
  EXPECT_TRUE(Stragglers(*loop).empty());
  EXPECT_TRUE(loop->resource_needs().workers.empty());
}

TEST(LinkStragglers, ASlowEgressNamesItsSenderAsACommunicationStragglerWithin3Iterations) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  constexpr int64_t kOnset = 60;
  RunRing(*loop, 120, [](int s, int64_t i) { return s == 3 && i >= kOnset ? 8 * kHop : kHop; });
  const auto flagged = Stragglers(*loop);
  ASSERT_FALSE(flagged.empty());
  EXPECT_EQ(flagged.front()->worker, 3);
  EXPECT_EQ(flagged.front()->straggler.cause, api::StragglerCause::kCommunication);
  EXPECT_LE(flagged.front()->t, 0.1 * (kOnset + 3) + 1e-9);
  for (const auto* e : flagged) EXPECT_EQ(e->worker, 3);
  ASSERT_EQ(loop->resource_needs().workers.size(), 1u);
  EXPECT_EQ(loop->resource_needs().workers[0].cause, api::StragglerCause::kCommunication);
}

// The link's second slow reading is strong evidence: the round it closes flags the
// worker, before its own timings (all members wait on the link alike) could show it.
TEST(LinkStragglers, AStrongSlowLinkFlagsItsWorkerAtTheRoundOfItsSecondSlowReading) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  constexpr int64_t kOnset = 60;
  RunRing(*loop, 70, [](int s, int64_t i) { return s == 3 && i >= kOnset ? 8 * kHop : kHop; });
  const auto flagged = Stragglers(*loop);
  ASSERT_EQ(flagged.size(), 1u);
  EXPECT_EQ(flagged.front()->worker, 3);
  EXPECT_EQ(flagged.front()->straggler.cause, api::StragglerCause::kCommunication);
  EXPECT_GT(flagged.front()->straggler.slowdown, 6.0) << "the link's slowdown";
  EXPECT_DOUBLE_EQ(flagged.front()->t, 0.1 * (kOnset + 1));
}

// One slow reading now and then (a hiccup on some link) is never strong evidence.
TEST(LinkStragglers, LinkHiccupsFlagNobody) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  RunRing(*loop, 300, [](int s, int64_t i) { return i % 7 == 0 && s == i % kRing ? 10 * kHop : kHop; });
  EXPECT_TRUE(Stragglers(*loop).empty());
}

// The times of the straggler events that start an episode (not updates).
std::vector<double> Onsets(const JobControlLoop& loop) {
  std::vector<double> onsets;
  bool straggling = false;
  for (const TimelineEvent& e : loop.timeline()) {
    const std::string name(EventName(e.kind));
    if (name == "straggler" && !straggling) onsets.push_back(e.t);
    if (name == "straggler") straggling = true;
    if (name == "recovered") straggling = false;
  }
  return onsets;
}

TEST(LinkStragglers, AStrongLinkFlagsAgainInItsNextEpisode) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  RunRing(*loop, 260, [](int s, int64_t i) {
    return s == 3 && ((i >= 40 && i < 120) || i >= 200) ? 8 * kHop : kHop;
  });
  EXPECT_EQ(Onsets(*loop), (std::vector<double>{0.1 * 41, 0.1 * 201}));
}

// What was given back to a communication straggler is probed: the same link slowdown
// coming back within two windows is judged by the lower recurrence bar (3x here: under
// the 4x bar for fresh evidence), so the worker is flagged at its second slow reading
// again instead of a detection window later.
TEST(LinkStragglers, ASlowLinkComingBackAfterTheGiveBackFlagsAtItsSecondSlowReading) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  int64_t given_back = 0;  // the iteration after which the need left the request
  bool listed = false;
  RunRing(*loop, 400, [&](int s, int64_t i) {
    if (s != 3) return kHop;
    if (i >= 40 && i < 60) return 8 * kHop;  // the contention, until it is capped
    return given_back > 0 && i > given_back ? 3 * kHop : kHop;  // back once uncapped
  }, 3, [&](int64_t i) {
    const bool now = !loop->resource_needs().workers.empty();
    if (listed && !now && given_back == 0) given_back = i;
    listed = now;
  });
  ASSERT_GT(given_back, 60) << "the need left the request";
  const std::vector<double> onsets = Onsets(*loop);
  ASSERT_EQ(onsets.size(), 2u);
  EXPECT_DOUBLE_EQ(onsets[0], 0.1 * 41);
  EXPECT_DOUBLE_EQ(onsets[1], 0.1 * static_cast<double>(given_back + 2));

  // The same 3x link without a give-back before it is not strong evidence.
  auto fresh = JobControlLoop::Create(Spec());
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  const int64_t onset = given_back + 1;
  RunRing(*fresh, onset + 5, [&](int s, int64_t i) { return s == 3 && i >= onset ? 3 * kHop : kHop; });
  EXPECT_TRUE(Onsets(*fresh).empty());
}

// A link 8x slow whose time is a sliver of the iteration: the detector finds the worker
// recovered half a window after the flag, and the same evidence does not flag it again
// (once per episode of the evidence, or it would flap every few rounds).
TEST(LinkStragglers, AWorkerFoundRecoveredIsNotFlaggedAgainWhileItsLinkStaysSlow) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  constexpr double kSliver = kHop / 100;
  RunRing(*loop, 200, [](int s, int64_t i) { return s == 3 && i >= 40 ? 8 * kSliver : kSliver; });
  EXPECT_EQ(Onsets(*loop), std::vector<double>{0.1 * 41});
  bool recovered = false;
  for (const TimelineEvent& e : loop->timeline()) recovered |= EventName(e.kind) == std::string("recovered");
  EXPECT_TRUE(recovered);
}

TEST(LinkStragglers, AWorkerSlowBothWaysIsNamedAndNotItsNeighbours) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  // Worker 2's uplink shaped both ways: the links 1 -> 2 and 2 -> 3 are slow.
  RunRing(*loop, 120, [](int s, int64_t i) { return (s == 1 || s == 2) && i >= 40 ? 6 * kHop : kHop; });
  const auto flagged = Stragglers(*loop);
  ASSERT_FALSE(flagged.empty());
  for (const auto* e : flagged) EXPECT_EQ(e->worker, 2);
}

// The first iteration whose reports brought a mode decision (0: none).
int64_t FirstModeDecision(const JobControlLoop& loop) {
  for (const TimelineEvent& e : loop.timeline()) {
    if (EventName(e.kind) == std::string("mode")) return std::llround(e.t / 0.1);
  }
  return 0;
}

// A hard slow link: the mode waits a detection window for a reallocation, unless the
// runtime says it has nothing to give that worker; then the mode decides at once.
TEST(LinkStragglers, ACommunicationStragglerWithNothingToGiveIsTheModesWithoutWaiting) {
  const Hop slow = [](int s, int64_t i) { return (s == 1 || s == 2) && i >= 40 ? 6 * kHop : kHop; };
  auto waiting = JobControlLoop::Create(Spec());
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  RunRing(*waiting, 120, slow);
  auto unmet = JobControlLoop::Create(Spec());
  ASSERT_TRUE(unmet.ok()) << unmet.status();
  int64_t told = 0;
  RunRing(*unmet, 120, slow, 3, [&](int64_t i) {
    const ResourceNeeds& needs = unmet->resource_needs();
    if (needs.workers.empty() || told != 0) return;
    told = i;
    unmet->NoteUnmetNeeds(needs.revision - 1, {2});  // stale: ignored
    unmet->NoteUnmetNeeds(needs.revision, {2});
  });
  ASSERT_GT(told, 0);
  const int64_t waited = FirstModeDecision(*waiting), acted = FirstModeDecision(*unmet);
  ASSERT_GT(waited, 0);
  ASSERT_GT(acted, 0);
  EXPECT_GE(waited - told, Spec().mitigation.detection.window) << "reallocation's window first";
  // Without the wait the mode acts at the round close after the runtime's word, not at
  // the loop's next periodic decision (decide_every_rounds later).
  EXPECT_LE(acted - told, 1) << "told " << told << " waited " << waited;
  EXPECT_LT(acted, waited);
}

TEST(LinkStragglers, ALinkReadingFromAnUnknownPeerIsRefusedNamingTheField) {
  auto loop = JobControlLoop::Create(Spec());
  ASSERT_TRUE(loop.ok()) << loop.status();
  api::WorkerReport r;
  r.worker = 1;
  r.iteration = 1;
  r.local_batch = 64;
  r.link = api::LinkReading{kRing, 0.01, 10};
  EXPECT_EQ(loop->Observe(r).status().message(), "link_peer: must be another worker in [0, 6), got 6");
}

}  // namespace
}  // namespace star::op
