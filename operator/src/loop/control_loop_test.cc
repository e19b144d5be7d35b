#include "star/operator/control_loop.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <memory>
#include <random>
#include <tuple>

#include <gtest/gtest.h>

namespace star::op {
namespace {

constexpr int kWorkers = 4;
constexpr int64_t kGlobalBatch = 256;
constexpr int kReportEvery = 5;

api::TrainingJobSpec Spec(api::SyncPolicy policy, bool amp, bool batches) {
  api::TrainingJobSpec s;
  s.workers.replicas = kWorkers;
  s.training.global_batch_size = kGlobalBatch;
  s.training.target_accuracy = 0.9;
  s.synchronization.policy = policy;
  s.mitigation.detection.window = 6;
  s.mitigation.amp.enabled = amp;
  s.mitigation.batch_adaptation.enabled = batches;
  return s;
}

// Compute slowdown of worker w at iteration i.
using Slowdown = std::function<double(int w, int64_t i)>;

struct RunResult {
  std::vector<api::Decision> decisions;  // every distinct decision, in issue order
  std::vector<int64_t> reported_before;  // per decision: the largest iteration reported
  int nonempty_responses = 0;
};

// A synthetic job of kWorkers workers that follows the loop's decisions: a worker's
// compute time is 0.1 s per 64 samples x slowdown x (0.7 with AMP), communication
// 0.02 s, both with 5% lognormal noise (fixed seed). Every worker reports every
// kReportEvery iterations. Checks on the way that every new decision applies after
// every iteration reported before it.
// `after` (optional) runs after every report cycle, with its iteration; every report
// says its worker's data loader draws `lookahead` batches ahead.
RunResult RunJob(JobControlLoop& loop, int64_t iterations, const Slowdown& slow,
              uint64_t seed = 7, double amp_factor = 0.7,
              const std::function<void(int64_t)>& after = {}, int lookahead = 0) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  RunResult out;
  std::optional<api::Decision> latest;
  int64_t max_reported = -1;
  std::vector<int64_t> last_reported(kWorkers, -1);
  for (int64_t i = kReportEvery; i <= iterations; i += kReportEvery) {
    for (int w = 0; w < kWorkers; ++w) {
      int64_t batch = kGlobalBatch / kWorkers;
      bool amp = false;
      if (latest && latest->apply_at_iteration <= i) {
        batch = latest->workers[static_cast<size_t>(w)].batch;
        amp = latest->workers[static_cast<size_t>(w)].amp;
      }
      api::WorkerReport r;
      r.worker = w;
      r.iteration = i;
      r.iterations = kReportEvery;
      r.time_seconds = static_cast<double>(i) * 0.15;
      r.local_batch = static_cast<int>(batch);
      r.amp = amp;
      if (lookahead > 0) r.lookahead = lookahead;
      r.compute_seconds = 0.1 * static_cast<double>(batch) / 64.0 * slow(w, i) *
                          (amp ? amp_factor : 1.0) * noise(rng);
      r.communication_seconds = 0.02 * noise(rng);
      max_reported = std::max(max_reported, i);
      last_reported[static_cast<size_t>(w)] = i;
      StatusOr<std::optional<api::Decision>> d = loop.Observe(r);
      EXPECT_TRUE(d.ok()) << d.status();
      if (!d.ok() || !d.value()) continue;
      ++out.nonempty_responses;
      const api::Decision& dec = *d.value();
      if (!latest || dec.epoch != latest->epoch) {
        EXPECT_TRUE(api::Validate(dec).ok());
        EXPECT_GT(dec.apply_at_iteration, max_reported) << "epoch " << dec.epoch;
        if (latest) {
          EXPECT_EQ(dec.epoch, latest->epoch + 1);
          // Every worker passed the previous decision before this one replaced it (a
          // worker learns only the newest decision).
          for (int v = 0; v < kWorkers; ++v) {
            EXPECT_GE(last_reported[static_cast<size_t>(v)], latest->apply_at_iteration)
                << "epoch " << dec.epoch << " worker " << v;
          }
        }
        out.decisions.push_back(dec);
        out.reported_before.push_back(max_reported);
        latest = dec;
      }
    }
    if (after) after(i);
  }
  return out;
}

// The timeline, one event per line, for failure messages.
std::string TimelineText(const JobControlLoop& loop) {
  std::string all;
  for (const auto& e : loop.timeline()) {
    all += std::to_string(e.t) + " " + std::string(EventName(e.kind)) + " " +
           std::to_string(e.worker) + " " + EventDetail(e) + "\n";
  }
  return all;
}

JobControlLoop MakeLoop(const api::TrainingJobSpec& spec) {
  StatusOr<JobControlLoop> loop = JobControlLoop::Create(spec);
  EXPECT_TRUE(loop.ok()) << loop.status();
  return std::move(loop).value();
}

std::vector<const TimelineEvent*> Events(const JobControlLoop& loop, const std::string& event,
                                         int worker) {
  std::vector<const TimelineEvent*> out;
  for (const TimelineEvent& e : loop.timeline()) {
    if (EventName(e.kind) == event && e.worker == worker) out.push_back(&e);
  }
  return out;
}

TEST(JobControlLoop, CleanRunIssuesNoDecisionAndRecordsNothing) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kAuto, true, true));
  RunResult r = RunJob(loop, 300, [](int, int64_t) { return 1.0; });
  // Decided contract: the baseline (SSGD, equal batches, AMP off) needs no decision.
  EXPECT_TRUE(r.decisions.empty());
  EXPECT_EQ(r.nonempty_responses, 0);
  EXPECT_EQ(loop.current(), nullptr);
  EXPECT_TRUE(loop.timeline().empty());
  EXPECT_TRUE(loop.stragglers().empty());
  EXPECT_GE(loop.rounds(), 300 / kReportEvery);
}

TEST(JobControlLoop, EstimatedTtaExtrapolatesTheRateSoFarToMaxIterations) {
  api::TrainingJobSpec spec = Spec(api::SyncPolicy::kAuto, true, true);
  spec.training.max_iterations = 1000;
  JobControlLoop loop = MakeLoop(spec);
  EXPECT_FALSE(loop.estimated_tta_seconds());  // no report yet
  RunJob(loop, 200, [](int, int64_t) { return 1.0; });
  // 200 iterations at time 200 x 0.15 = 30 s: 1000 at 150 s.
  ASSERT_TRUE(loop.estimated_tta_seconds());
  EXPECT_DOUBLE_EQ(*loop.estimated_tta_seconds(), 150.0);

  spec.training.target_accuracy.reset();
  JobControlLoop untargeted = MakeLoop(spec);
  RunJob(untargeted, 20, [](int, int64_t) { return 1.0; });
  EXPECT_FALSE(untargeted.estimated_tta_seconds());
  spec = Spec(api::SyncPolicy::kAuto, true, true);  // no maxIterations
  JobControlLoop unbounded = MakeLoop(spec);
  RunJob(unbounded, 20, [](int, int64_t) { return 1.0; });
  EXPECT_FALSE(unbounded.estimated_tta_seconds());
}

TEST(JobControlLoop, ComputeStragglerGetsAmpAndLosesItAfterRecoveryWithHysteresis) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kSsgd, true, false));
  RunResult r = RunJob(loop, 600, [](int w, int64_t i) {
    return (w == 2 && i >= 100 && i < 300) ? 3.0 : 1.0;
  });
  auto straggler = Events(loop, "straggler", 2);
  auto recovered = Events(loop, "recovered", 2);
  auto amp_on = Events(loop, "amp_on", 2);
  auto amp_off = Events(loop, "amp_off", 2);
  ASSERT_FALSE(straggler.empty());
  EXPECT_EQ(straggler.front()->straggler.cause, api::StragglerCause::kCompute);
  EXPECT_GE(straggler.front()->t, 100 * 0.15);
  ASSERT_EQ(amp_on.size(), 1u);
  ASSERT_EQ(amp_off.size(), 1u);
  ASSERT_FALSE(recovered.empty());
  EXPECT_GE(amp_on.front()->t, straggler.front()->t);
  // Hysteresis: AMP stays on for a while after recovery.
  EXPECT_GT(amp_off.front()->t, recovered.front()->t);
  // No other worker is touched.
  for (int w : {0, 1, 3}) {
    EXPECT_TRUE(Events(loop, "amp_on", w).empty()) << w;
    EXPECT_TRUE(Events(loop, "straggler", w).empty()) << w;
  }
  bool saw_amp = false;
  for (const api::Decision& d : r.decisions) {
    saw_amp = saw_amp || d.workers[2].amp;
    EXPECT_EQ(d.mode, api::SyncMode::kSsgd);
  }
  EXPECT_TRUE(saw_amp);
  ASSERT_NE(loop.current(), nullptr);
  EXPECT_FALSE(loop.current()->workers[2].amp);
}

// bf16 on a CPU with AMX: AMP makes compute ~4.5x faster, which hides a 4x contention
// completely. AMP must stay on while the contention lasts (no off/on flapping), go off
// after it ends, and under Auto the job stays synchronous: AMP handles the straggler.
TEST(JobControlLoop, AmpThatHidesTheContentionStaysOnUntilTheContentionEnds) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kAuto, true, false));
  RunResult r = RunJob(
      loop, 900, [](int w, int64_t i) { return (w == 2 && i >= 100 && i < 500) ? 4.0 : 1.0; },
      /*seed=*/11, /*amp_factor=*/1 / 4.5);
  auto amp_on = Events(loop, "amp_on", 2);
  auto amp_off = Events(loop, "amp_off", 2);
  ASSERT_EQ(amp_on.size(), 1u);
  ASSERT_EQ(amp_off.size(), 1u);
  EXPECT_GE(amp_off.front()->t, 500 * 0.15);  // not before the contention ended
  for (const api::Decision& d : r.decisions) EXPECT_EQ(d.mode, api::SyncMode::kSsgd);
  EXPECT_TRUE(Events(loop, "mode", -1).empty()) << TimelineText(loop);
}

// Two of four workers 3x slower: the MAD rule's typical worker is then slow too and it
// flags nobody, yet the job loses most of its speed. Auto still leaves SSGD (Select's
// estimate beats SSGD's by more than the margin); a clean run never does (see above).
TEST(JobControlLoop, AutoLeavesSsgdWhenHalfTheWorkersAreSlowEvenUnflagged) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kAuto, false, false));
  RunResult r = RunJob(loop, 400, [](int w, int64_t i) { return (w >= 2 && i >= 100) ? 3.0 : 1.0; });
  ASSERT_FALSE(r.decisions.empty());
  EXPECT_NE(r.decisions.back().mode, api::SyncMode::kSsgd);
  for (const api::Decision& d : r.decisions) EXPECT_GE(d.apply_at_iteration, 100);
}

// Workers 1 and 3 slow 4x, then 1.6x (iteration times about auto_min_spread apart), then
// even; the detector's flags on them come and go. The gate that keeps noise from taking
// a clean job out of SSGD must not send a job back to SSGD whenever the flags lapse
// while its workers are still uneven (the loop did: SSGD, fixed_k, SSGD, fixed_k, ...,
// each switch restarting the momentum and waiting at an apply iteration). Out of SSGD,
// auto follows Select's estimate; once the workers are even, both go back to SSGD.
TEST(JobControlLoop, AutoStaysOutOfSsgdWhileTheWorkersStayUnevenUnflagged) {
  constexpr int64_t kEven = 700;
  auto slow = [](int w, int64_t i) {
    if (w % 2 == 0 || i < 100 || i >= kEven) return 1.0;
    return i < 300 ? 4.0 : 1.6;
  };
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kAuto, false, false));
  RunResult r = RunJob(loop, 1100, slow);
  const auto left = std::find_if(r.decisions.begin(), r.decisions.end(), [](const api::Decision& d) {
    return d.mode != api::SyncMode::kSsgd;
  });
  ASSERT_NE(left, r.decisions.end()) << TimelineText(loop);
  EXPECT_LT(left->apply_at_iteration, 300);
  for (auto d = left; d != r.decisions.end() && d->apply_at_iteration < kEven; ++d) {
    EXPECT_NE(d->mode, api::SyncMode::kSsgd) << "epoch " << d->epoch << "\n" << TimelineText(loop);
  }
  EXPECT_EQ(r.decisions.back().mode, api::SyncMode::kSsgd) << TimelineText(loop);
  EXPECT_GE(r.decisions.back().apply_at_iteration, kEven);
}

// bf16 on a CPU without native support: AMP makes compute 6x slower. Once that is
// measured, AMP goes off for the worker and does not come back, though the worker
// still straggles (and looked even slower with AMP on).
TEST(JobControlLoop, AmpThatSlowsTheWorkerGoesOffForGood) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kSsgd, true, false));
  RunJob(loop, 900, [](int w, int64_t i) { return (w == 2 && i >= 100) ? 2.0 : 1.0; },
         /*seed=*/5, /*amp_factor=*/6.0);
  ASSERT_EQ(Events(loop, "amp_on", 2).size(), 1u);
  ASSERT_EQ(Events(loop, "amp_off", 2).size(), 1u);
  ASSERT_NE(loop.current(), nullptr);
  EXPECT_FALSE(loop.current()->workers[2].amp);
  for (int w : {0, 1, 3}) EXPECT_TRUE(Events(loop, "amp_on", w).empty()) << w;
}

TEST(JobControlLoop, AmpDisabledNeverTurnsAmpOn) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kSsgd, false, false));
  RunJob(loop, 300, [](int w, int64_t i) { return (w == 2 && i >= 100) ? 3.0 : 1.0; });
  EXPECT_FALSE(Events(loop, "straggler", 2).empty());
  EXPECT_TRUE(Events(loop, "amp_on", 2).empty());
}

Slowdown Severe() {
  return [](int w, int64_t i) { return (w == 2 && i >= 100) ? 4.0 : 1.0; };
}

TEST(JobControlLoop, AutoLeavesSsgdForASevereStraggler) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kAuto, false, false));
  RunResult r = RunJob(loop, 300, Severe());
  ASSERT_FALSE(r.decisions.empty());
  EXPECT_NE(r.decisions.back().mode, api::SyncMode::kSsgd);
  EXPECT_FALSE(Events(loop, "mode", -1).empty());
  const api::Decision& d = r.decisions.back();
  if (d.mode == api::SyncMode::kFixedK) {
    // Fastest first: the straggler comes last and is not in the ring.
    ASSERT_EQ(d.groups.size(), 1u);
    EXPECT_EQ(d.groups[0].back(), 2);
    EXPECT_LT(d.k, kWorkers);
  }
}

// A learned model that always scores one class highest, and counts its calls.
class FixedClassModel : public select::LearnedSelector {
 public:
  explicit FixedClassModel(int best) : best_(best) {}
  StatusOr<std::vector<float>> Scores(const select::SelectorFeatures&) override {
    ++calls;
    std::vector<float> s(select::kSelectorClassCount, 0.0f);
    s[static_cast<size_t>(best_)] = 1.0f;
    return s;
  }
  int calls = 0;

 private:
  int best_;
};

class BrokenModel : public select::LearnedSelector {
 public:
  StatusOr<std::vector<float>> Scores(const select::SelectorFeatures&) override {
    return Status::Internal("booster gone");
  }
};

api::TrainingJobSpec MlSpec(api::SyncPolicy policy = api::SyncPolicy::kAuto) {
  api::TrainingJobSpec s = Spec(policy, false, false);
  s.synchronization.selector = api::ModeSelector::kMl;
  return s;
}

JobControlLoop MakeLoop(const api::TrainingJobSpec& spec, LearnedModel learned) {
  StatusOr<JobControlLoop> loop = JobControlLoop::Create(spec, {}, std::move(learned));
  EXPECT_TRUE(loop.ok()) << loop.status();
  return std::move(loop).value();
}

// What the decisions set for the job's synchronisation, for comparing runs.
std::vector<std::tuple<api::SyncMode, int, std::vector<std::vector<int>>>> SyncOf(const RunResult& r) {
  std::vector<std::tuple<api::SyncMode, int, std::vector<std::vector<int>>>> out;
  for (const api::Decision& d : r.decisions) out.emplace_back(d.mode, d.k, d.groups);
  return out;
}

// fixed_k at kFixedKFractions[1] = 0.5 of 4 workers: k = 2 (the heuristic's k for one
// severe straggler out of four is 3).
constexpr int kHalfFixedK = select::kSelectorClassFixedKFirst + 1;

TEST(JobControlLoop, SelectorMlWithAModelDecidesTheModeTheModelPicks) {
  auto model = std::make_shared<FixedClassModel>(kHalfFixedK);
  JobControlLoop loop = MakeLoop(MlSpec(), {model, ""});
  RunResult r = RunJob(loop, 300, Severe());
  ASSERT_FALSE(r.decisions.empty());
  EXPECT_GT(model->calls, 0);
  const api::Decision& d = r.decisions.back();
  EXPECT_EQ(d.mode, api::SyncMode::kFixedK);
  EXPECT_EQ(d.k, 2);
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups[0].back(), 2) << "fastest first: the straggler comes last";
  EXPECT_TRUE(Events(loop, "selector_fallback", -1).empty());

  JobControlLoop heuristic = MakeLoop(Spec(api::SyncPolicy::kAuto, false, false));
  EXPECT_NE(SyncOf(RunJob(heuristic, 300, Severe())), SyncOf(r)) << "the model, not the heuristic, decided";
}

TEST(JobControlLoop, SelectorMlWithoutAModelFallsBackToTheHeuristicWithOneEvent) {
  JobControlLoop loop = MakeLoop(MlSpec(), {nullptr, "cannot open /none/selector.json"});
  const auto at_start = Events(loop, "selector_fallback", -1);
  ASSERT_EQ(at_start.size(), 1u) << "recorded when the loop is made";
  EXPECT_EQ(at_start[0]->t, 0);
  EXPECT_EQ(EventDetail(*at_start[0]), "cannot open /none/selector.json");
  RunResult r = RunJob(loop, 300, Severe());
  EXPECT_EQ(Events(loop, "selector_fallback", -1).size(), 1u);

  JobControlLoop heuristic = MakeLoop(Spec(api::SyncPolicy::kAuto, false, false));
  RunResult h = RunJob(heuristic, 300, Severe());
  ASSERT_FALSE(h.decisions.empty());
  EXPECT_EQ(SyncOf(r), SyncOf(h));
}

TEST(JobControlLoop, AModelThatFailsGivesWayToTheHeuristicRecordedOnceAtTheReport) {
  JobControlLoop loop = MakeLoop(MlSpec(), {std::make_shared<BrokenModel>(), ""});
  EXPECT_TRUE(loop.timeline().empty()) << "a model is there";
  RunResult r = RunJob(loop, 300, Severe());
  const auto fallbacks = Events(loop, "selector_fallback", -1);
  ASSERT_EQ(fallbacks.size(), 1u);
  EXPECT_GT(fallbacks[0]->t, 0);
  EXPECT_EQ(EventDetail(*fallbacks[0]), "model failed: booster gone");

  JobControlLoop heuristic = MakeLoop(Spec(api::SyncPolicy::kAuto, false, false));
  EXPECT_EQ(SyncOf(r), SyncOf(RunJob(heuristic, 300, Severe())));
}

TEST(JobControlLoop, SelectorHeuristicAndFixedPoliciesIgnoreTheModel) {
  auto model = std::make_shared<FixedClassModel>(kHalfFixedK);
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kAuto, false, false), {model, ""});
  RunResult r = RunJob(loop, 300, Severe());
  EXPECT_EQ(model->calls, 0);
  EXPECT_TRUE(Events(loop, "selector_fallback", -1).empty());
  JobControlLoop heuristic = MakeLoop(Spec(api::SyncPolicy::kAuto, false, false));
  EXPECT_EQ(SyncOf(r), SyncOf(RunJob(heuristic, 300, Severe())));

  // A policy other than Auto selects nothing: no model needed, no fallback.
  JobControlLoop groups = MakeLoop(MlSpec(api::SyncPolicy::kGroups), {nullptr, "none"});
  RunJob(groups, 300, Severe());
  EXPECT_TRUE(Events(groups, "selector_fallback", -1).empty());
}

TEST(JobControlLoop, AResumedLoopKeepsTheStateInForceAndContinuesTheEpochs) {
  const api::TrainingJobSpec spec = Spec(api::SyncPolicy::kAuto, false, false);
  JobControlLoop first = MakeLoop(spec);
  RunResult r = RunJob(first, 300, Severe());
  ASSERT_FALSE(r.decisions.empty());
  const api::Decision last = r.decisions.back();
  ASSERT_NE(last.mode, api::SyncMode::kSsgd);

  // A restarted controller: the same straggler goes on; the mode in force is kept, and
  // any new decision is newer than what the workers have.
  JobControlLoop resumed = MakeLoop(spec);
  ASSERT_TRUE(resumed.Resume(last).ok());
  ASSERT_NE(resumed.current(), nullptr);
  EXPECT_EQ(*resumed.current(), last);
  RunResult again = RunJob(resumed, 300, Severe());
  ASSERT_FALSE(again.decisions.empty());
  EXPECT_EQ(again.decisions.front(), last) << "the decision in force is repeated to the workers";
  for (size_t i = 1; i < again.decisions.size(); ++i) EXPECT_GT(again.decisions[i].epoch, last.epoch);
  EXPECT_NE(again.decisions.back().mode, api::SyncMode::kSsgd);
  // (fixed_k and groups are within 1% of each other here: without
  // LoopOptions::mode_switch_margin noise would switch between them.)
  EXPECT_TRUE(Events(resumed, "mode", -1).empty()) << "no mode change: the mode in force fits";
}

TEST(JobControlLoop, ResumeRefusesADecisionThatDoesNotFitOrComesLate) {
  const api::TrainingJobSpec spec = Spec(api::SyncPolicy::kAuto, true, false);
  api::Decision d;
  d.epoch = 4;
  d.apply_at_iteration = 100;
  d.mode = api::SyncMode::kSsgd;
  d.k = 1;
  for (int w = 0; w < kWorkers - 1; ++w) d.workers.push_back({w, false, kGlobalBatch / kWorkers});
  JobControlLoop loop = MakeLoop(spec);
  Status s = loop.Resume(d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("decision.workers"), std::string::npos) << s;
  EXPECT_EQ(loop.current(), nullptr) << "a refused resume changes nothing";
  d.workers.push_back({kWorkers - 1, true, kGlobalBatch / kWorkers});
  d.k = kWorkers + 1;
  s = loop.Resume(d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("decision.k"), std::string::npos) << s;
  d.k = kWorkers;
  api::WorkerReport r;
  r.worker = 0;
  r.iteration = 1;
  r.local_batch = 64;
  r.compute_seconds = 0.1;
  ASSERT_TRUE(loop.Observe(r).ok());
  s = loop.Resume(d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("before any report"), std::string::npos) << s;
}

TEST(JobControlLoop, SsgdPolicyNeverChangesMode) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kSsgd, false, false));
  RunResult r = RunJob(loop, 300, Severe());
  EXPECT_FALSE(Events(loop, "straggler", 2).empty());
  EXPECT_TRUE(Events(loop, "mode", -1).empty());
  for (const api::Decision& d : r.decisions) EXPECT_EQ(d.mode, api::SyncMode::kSsgd);
}

TEST(JobControlLoop, FixedKPolicyOrdersWorkersFastestFirstWithTheStragglerOutOfTheRing) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kFixedK, false, false));
  RunResult r = RunJob(loop, 300, Severe());
  ASSERT_FALSE(r.decisions.empty());
  for (const api::Decision& d : r.decisions) EXPECT_EQ(d.mode, api::SyncMode::kFixedK);
  const api::Decision& d = r.decisions.back();
  ASSERT_EQ(d.groups.size(), 1u);
  std::vector<int> ranks = d.groups[0];
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(d.groups[0].back(), 2);
  EXPECT_LT(d.k, kWorkers);
}

// Every worker's first report holds its startup (iterations 6x slower); worker 2 is 2x
// slower from the start. Until the detector's window is full, the loop reads a worker
// from its few reports: the startup in them must not rank a fast worker behind the
// straggler, which would put the straggler in fixed_k's ring and a fast worker out.
TEST(JobControlLoop, AStartupInTheFirstReportsKeepsTheStragglerOutOfTheRing) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kFixedK, false, false));
  RunResult r = RunJob(loop, 300, [](int w, int64_t i) {
    return (i == kReportEvery ? 6.0 : 1.0) * (w == 2 ? 2.0 : 1.0);
  });
  ASSERT_FALSE(r.decisions.empty()) << TimelineText(loop);
  for (const api::Decision& d : r.decisions) {
    ASSERT_EQ(d.groups.size(), 1u);
    EXPECT_EQ(d.groups[0].back(), 2) << "epoch " << d.epoch << "\n" << TimelineText(loop);
  }
}

// Two stragglers from iteration 100: worker 1 4x slower (a step the detector flags at
// once), worker 3 1.4x (iterations 1.33x: below the step path, flagged only once its
// window shows it). fixed_k's first decision after the step comes on worker 1's flag
// alone, while worker 3's window still holds mostly its fast reports: its newest
// reports must rank it behind the fast workers 0 and 2, not in the ring among them.
TEST(JobControlLoop, AWorkerSlowedBeforeItIsFlaggedRanksBehindTheFastWorkers) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kFixedK, false, false));
  RunResult r = RunJob(loop, 300, [](int w, int64_t i) {
    if (i < 100) return 1.0;
    return w == 1 ? 4.0 : w == 3 ? 1.4 : 1.0;
  });
  int after_step = 0;
  for (size_t i = 0; i < r.decisions.size(); ++i) {
    const api::Decision& d = r.decisions[i];
    if (r.reported_before[i] < 100 + kReportEvery) continue;
    ++after_step;
    ASSERT_EQ(d.groups.size(), 1u);
    std::vector<int> fastest(d.groups[0].begin(), d.groups[0].begin() + 2);
    std::sort(fastest.begin(), fastest.end());
    EXPECT_EQ(fastest, (std::vector<int>{0, 2})) << "epoch " << d.epoch << "\n" << TimelineText(loop);
  }
  EXPECT_GT(after_step, 0) << TimelineText(loop);
}

TEST(JobControlLoop, GroupsPolicySeparatesTheSevereStraggler) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kGroups, false, false));
  RunResult r = RunJob(loop, 300, Severe());
  ASSERT_FALSE(r.decisions.empty());
  const api::Decision& d = r.decisions.back();
  EXPECT_EQ(d.mode, api::SyncMode::kGroups);
  EXPECT_EQ(d.groups, (std::vector<std::vector<int>>{{0, 1, 3}, {2}}));
}

// The apply margin (5 iterations by default) is scaled by the slowest / fastest time
// only in a mode that lets the fast workers run ahead. Worker 2 is 4x slower from
// iteration 100, worker 3 from 200: the first split is decided in one group of all,
// where every worker is in step, the second in two groups, where they run apart.
TEST(JobControlLoop, TheApplyMarginIsScaledOnlyInModesWhereWorkersRunApart) {
  LoopOptions patient;
  patient.max_drift_wait_seconds = 1e9;
  StatusOr<JobControlLoop> loop =
      JobControlLoop::Create(Spec(api::SyncPolicy::kGroups, false, false), patient);
  ASSERT_TRUE(loop.ok()) << loop.status();
  RunResult r = RunJob(*loop, 400, [](int w, int64_t i) {
    return (w == 2 && i >= 100) || (w == 3 && i >= 200) ? 4.0 : 1.0;
  });
  // The policy's first decision is one group of all; the split comes after it.
  const auto split = std::find_if(r.decisions.begin(), r.decisions.end(),
                                  [](const api::Decision& d) { return d.groups.size() > 1; });
  ASSERT_TRUE(split != r.decisions.end() && split + 1 != r.decisions.end()) << TimelineText(*loop);
  const size_t first = static_cast<size_t>(split - r.decisions.begin());
  EXPECT_EQ(split->groups, (std::vector<std::vector<int>>{{0, 1, 3}, {2}}));
  EXPECT_EQ(split->apply_at_iteration - r.reported_before[first], patient.apply_margin_iterations);
  // Decided in two groups: compute 0.4 s + 0.02 s against 0.1 s + 0.02 s, a ratio of
  // about 3.5.
  EXPECT_GE(split[1].apply_at_iteration - r.reported_before[first + 1],
            3 * patient.apply_margin_iterations);
}

// A data loader that draws batches ahead (prefetching) learns a batch decision before it
// draws the batch of the decision's iteration: the decision lies the reported lookahead
// further ahead.
TEST(JobControlLoop, DecisionsApplyPastTheDataLoadersLookahead) {
  constexpr int kLookahead = 9;
  for (int lookahead : {0, kLookahead}) {
    JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kSsgd, false, true));
    RunResult r = RunJob(loop, 300, [](int w, int64_t) { return w == 2 ? 2.0 : 1.0; }, 7, 0.7, {}, lookahead);
    ASSERT_FALSE(r.decisions.empty()) << TimelineText(loop);
    EXPECT_EQ(r.decisions[0].apply_at_iteration - r.reported_before[0],
              LoopOptions{}.apply_margin_iterations + lookahead);
  }
}

// Workers that run at their own pace, as in groups mode (each worker's iteration count
// advances at its own speed): worker w's iteration takes 0.1 s x slow(w, t) + 0.02 s,
// and it reports every kReportEvery iterations. Returns the decisions issued after
// `from` seconds of job time, up to `until`.
std::vector<api::Decision> RunDrifting(JobControlLoop& loop, double until, double from,
                                       const std::function<double(int, double)>& slow) {
  std::vector<double> t(kWorkers, 0);
  std::vector<int64_t> it(kWorkers, 0);
  std::vector<api::Decision> issued;
  int64_t last_epoch = 0;
  for (;;) {
    const int w = static_cast<int>(std::min_element(t.begin(), t.end()) - t.begin());
    const double per_iteration = 0.1 * slow(w, t[static_cast<size_t>(w)]) + 0.02;
    t[static_cast<size_t>(w)] += kReportEvery * per_iteration;
    it[static_cast<size_t>(w)] += kReportEvery;
    if (t[static_cast<size_t>(w)] > until) break;
    api::WorkerReport r;
    r.worker = w;
    r.iteration = it[static_cast<size_t>(w)];
    r.iterations = kReportEvery;
    r.time_seconds = t[static_cast<size_t>(w)];
    r.local_batch = kGlobalBatch / kWorkers;
    r.compute_seconds = per_iteration - 0.02;
    r.communication_seconds = 0.02;
    StatusOr<std::optional<api::Decision>> d = loop.Observe(r);
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok() || !d.value() || d.value()->epoch == last_epoch) continue;
    last_epoch = d.value()->epoch;
    if (r.time_seconds >= from) issued.push_back(*d.value());
  }
  return issued;
}

TEST(JobControlLoop, NoRegroupWhenTheFastWorkersWouldWaitLongForTheSlowOne) {
  // Worker 2 is 5 times slower from the start: the job goes to groups {0,1,3} {2} and
  // worker 2's iteration count falls behind. At 60 s worker 3 slows to twice the pace
  // of 0 and 1, which would be a regroup {0,1} {3} {2}; but every worker would first
  // have to reach one apply iteration, and worker 2 is hundreds of iterations behind.
  auto slow = [](int w, double t) { return w == 2 ? 5.0 : (w == 3 && t > 60 ? 2.0 : 1.0); };
  api::TrainingJobSpec spec = Spec(api::SyncPolicy::kGroups, false, false);
  LoopOptions patient;
  patient.max_drift_wait_seconds = 1e9;
  StatusOr<JobControlLoop> free_loop = JobControlLoop::Create(spec, patient);
  ASSERT_TRUE(free_loop.ok()) << free_loop.status();
  const std::vector<api::Decision> regroup = RunDrifting(*free_loop, 120, 60, slow);
  ASSERT_FALSE(regroup.empty());  // without the limit the loop regroups
  EXPECT_EQ(regroup.back().groups, (std::vector<std::vector<int>>{{0, 1}, {3}, {2}}));

  JobControlLoop loop = MakeLoop(spec);
  EXPECT_TRUE(RunDrifting(loop, 120, 60, slow).empty());
  ASSERT_NE(loop.current(), nullptr);
  EXPECT_EQ(loop.current()->groups, (std::vector<std::vector<int>>{{0, 1, 3}, {2}}));
}

// fixed_k with a child ahead of its ring: worker 2 is 1.5x slower from the start, so it
// is the child, and at 60 s ring member 1 slows 6x. The ring then moves at worker 1's
// pace and child 2 runs ahead of it: its wait at the apply iteration costs the ring
// nothing and grows at every iteration, so the loop must not hold the new ring for it
// (a testbed run that held kept a straggler in its ring to the end).
TEST(JobControlLoop, FixedKTakesANewStragglerOutOfItsRingWhileAChildRunsAhead) {
  auto slow = [](int w, double t) { return w == 2 ? 1.5 : (w == 1 && t > 60 ? 6.0 : 1.0); };
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kFixedK, false, false));
  const std::vector<api::Decision> later = RunDrifting(loop, 120, 60, slow);
  ASSERT_FALSE(later.empty()) << TimelineText(loop);
  const api::Decision& d = later.back();
  ASSERT_EQ(d.groups.size(), 1u);
  const auto ring_end = d.groups[0].begin() + d.k;
  EXPECT_EQ(std::find(d.groups[0].begin(), ring_end, 1), ring_end) << TimelineText(loop);
}

// The same drift with batch adaptation, worker 3 slowing only 1.3x: not a regroup, but
// new batches for its group. New batches alone are no switch (each worker takes them up
// at the apply iteration on its own), so they go through at once, with no wait for
// worker 2, each after the one before.
TEST(JobControlLoop, NewBatchesAloneGoThroughWhileWorkersDrift) {
  auto slow = [](int w, double t) { return w == 2 ? 5.0 : (w == 3 && t > 60 ? 1.3 : 1.0); };
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kGroups, false, true));
  const std::vector<api::Decision> later = RunDrifting(loop, 120, 60, slow);
  ASSERT_FALSE(later.empty()) << TimelineText(loop);
  int64_t previous = -1;
  for (const api::Decision& d : later) {
    EXPECT_EQ(d.groups, (std::vector<std::vector<int>>{{0, 1, 3}, {2}}));
    EXPECT_GT(d.apply_at_iteration, previous);
    previous = d.apply_at_iteration;
  }
  const api::Decision& last = later.back();
  EXPECT_LT(last.workers[3].batch, last.workers[0].batch) << TimelineText(loop);
  EXPECT_EQ(last.workers[2].batch, kGlobalBatch / kWorkers);  // alone in its group
}

TEST(JobControlLoop, StaticSlowWorkerGetsSmallerBatchSummingToGlobal) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kSsgd, false, true));
  RunResult r = RunJob(loop, 300, [](int w, int64_t) { return w == 2 ? 2.0 : 1.0; });
  auto straggler = Events(loop, "straggler", 2);
  ASSERT_FALSE(straggler.empty());
  EXPECT_EQ(straggler.front()->straggler.kind, api::StragglerKind::kStatic);
  ASSERT_FALSE(Events(loop, "batches", -1).empty());
  ASSERT_NE(loop.current(), nullptr);
  const api::Decision& d = *loop.current();
  int64_t sum = 0;
  for (const api::WorkerSetting& s : d.workers) sum += s.batch;
  EXPECT_EQ(sum, kGlobalBatch);
  for (int w : {0, 1, 3}) EXPECT_LT(d.workers[2].batch, d.workers[static_cast<size_t>(w)].batch);
  for (const api::Decision& dec : r.decisions) {
    int64_t s = 0;
    for (const api::WorkerSetting& ws : dec.workers) s += ws.batch;
    EXPECT_EQ(s, kGlobalBatch);
  }
}

// In groups mode batches are shared within each group only: under auto, a worker alone
// in its group keeps its equal share, and every group's batches sum to its members'
// equal shares.
TEST(JobControlLoop, GroupsShareBatchesOnlyWithinAGroup) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kGroups, false, true));
  RunResult r = RunJob(loop, 400, [](int w, int64_t) { return w == 2 ? 2.0 : 1.0; });
  const int64_t share = kGlobalBatch / kWorkers;
  int grouped = 0;
  for (const api::Decision& d : r.decisions) {
    if (d.mode != api::SyncMode::kGroups || d.groups.size() < 2) continue;
    ++grouped;
    for (const std::vector<int>& group : d.groups) {
      int64_t sum = 0;
      for (int w : group) sum += d.workers[static_cast<size_t>(w)].batch;
      EXPECT_EQ(sum, share * static_cast<int64_t>(group.size())) << TimelineText(loop);
      if (group.size() == 1) {
        EXPECT_EQ(d.workers[static_cast<size_t>(group[0])].batch, share);
      }
    }
  }
  EXPECT_GT(grouped, 0) << "the static straggler should split the groups\n" << TimelineText(loop);
}

TEST(JobControlLoop, WithoutBatchAdaptationBatchesStayEqual) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kSsgd, false, false));
  RunResult r = RunJob(loop, 300, [](int w, int64_t) { return w == 2 ? 2.0 : 1.0; });
  EXPECT_TRUE(Events(loop, "batches", -1).empty());
  for (const api::Decision& d : r.decisions) {
    for (const api::WorkerSetting& s : d.workers) EXPECT_EQ(s.batch, kGlobalBatch / kWorkers);
  }
}

TEST(JobControlLoop, BadReportsAreRejectedNamingTheFieldAndChangeNothing) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kAuto, true, true));
  RunJob(loop, 50, [](int, int64_t) { return 1.0; });
  const auto timeline = loop.timeline();
  const int64_t rounds = loop.rounds();

  api::WorkerReport good;
  good.worker = 0;
  good.iteration = 55;
  good.local_batch = 64;
  good.compute_seconds = 0.1;

  struct Case {
    std::function<void(api::WorkerReport&)> mutate;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](api::WorkerReport& r) { r.worker = kWorkers; }, "worker"},
      {[](api::WorkerReport& r) { r.worker = -1; }, "worker"},
      {[](api::WorkerReport& r) { r.iteration = 10; }, "iteration"},
      {[](api::WorkerReport& r) { r.iterations = 0; }, "iterations"},
      {[](api::WorkerReport& r) { r.compute_seconds = -1; }, "compute_seconds"},
      {[](api::WorkerReport& r) { r.time_seconds = std::nan(""); }, "time_seconds"},
      {[](api::WorkerReport& r) { r.local_batch = 0; }, "local_batch"},
      {[](api::WorkerReport& r) { r.global_grad_sq_norm = -2; }, "global_grad_sq_norm"},
  };
  for (const Case& c : cases) {
    api::WorkerReport r = good;
    c.mutate(r);
    StatusOr<std::optional<api::Decision>> d = loop.Observe(r);
    ASSERT_FALSE(d.ok()) << c.field;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(d.status().message().rfind(c.field + ":", 0), 0u) << d.status();
  }
  EXPECT_EQ(loop.timeline(), timeline);
  EXPECT_EQ(loop.rounds(), rounds);
  EXPECT_TRUE(loop.Observe(good).ok());
}

// Regression: a report at iteration INT64_MAX - 1 was accepted; the apply iteration of
// the next decision overflowed (UB) and the worker's later reports were refused.
TEST(JobControlLoop, AReportIterationNearInt64MaxIsRefusedAndTheLoopKeepsDeciding) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kAuto, true, true));
  for (const int64_t iteration : {std::numeric_limits<int64_t>::max() - 1, kMaxIteration + 1}) {
    api::WorkerReport r;
    r.worker = 0;
    r.iteration = iteration;
    r.local_batch = 64;
    r.compute_seconds = 0.1;
    StatusOr<std::optional<api::Decision>> d = loop.Observe(r);
    ASSERT_FALSE(d.ok()) << iteration;
    EXPECT_EQ(d.status().message().rfind("iteration: must be in [0, " + std::to_string(kMaxIteration) + "]", 0), 0u)
        << d.status();
  }
  RunResult r = RunJob(loop, 300, [](int w, int64_t) { return w == 2 ? 2.0 : 1.0; });
  EXPECT_FALSE(r.decisions.empty()) << TimelineText(loop);
}

// A job at the largest iteration a report may carry: the loop issues no decision that
// would apply past it (nor overflows computing one).
TEST(JobControlLoop, NoDecisionAppliesPastTheLargestIteration) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kAuto, true, true));
  for (int64_t i = 1; i <= 100; ++i) {
    for (int w = 0; w < kWorkers; ++w) {
      api::WorkerReport r;
      r.worker = w;
      r.iteration = kMaxIteration - 100 + i;
      r.time_seconds = static_cast<double>(i);
      r.local_batch = kGlobalBatch / kWorkers;
      r.compute_seconds = w == 1 ? 0.4 : 0.1;
      StatusOr<std::optional<api::Decision>> d = loop.Observe(r);
      ASSERT_TRUE(d.ok()) << d.status();
      if (*d) {
        EXPECT_LE((*d)->apply_at_iteration, kMaxIteration);
      }
    }
  }
}

TEST(JobControlLoop, TimelineEventsCarryTheStragglersTypedFields) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kAuto, true, true));
  RunJob(loop, 400, [](int w, int64_t i) { return (w == 2 && i >= 100) ? 2.0 : 1.0; });
  ASSERT_FALSE(loop.timeline().empty());
  bool saw_static = false;
  for (const TimelineEvent& e : loop.timeline()) {
    if (e.kind == EventKind::kStraggler) {
      EXPECT_EQ(e.worker, 2);
      EXPECT_EQ(e.straggler.cause, api::StragglerCause::kCompute);
      EXPECT_GT(e.straggler.slowdown, 1.2);
      saw_static = saw_static || e.straggler.kind == api::StragglerKind::kStatic;
    }
    if (e.kind == EventKind::kBatches) {
      EXPECT_EQ(e.batches.size(), static_cast<size_t>(kWorkers));
    }
  }
  EXPECT_TRUE(saw_static);
}

// The reallocation request over time: (iteration, request) after every report cycle.
std::vector<std::pair<int64_t, ResourceNeeds>> TrackNeeds(JobControlLoop& loop, int64_t iterations,
                                                          const Slowdown& slow, uint64_t seed,
                                                          double amp_factor) {
  std::vector<std::pair<int64_t, ResourceNeeds>> out;
  RunJob(loop, iterations, slow, seed, amp_factor,
         [&](int64_t i) { out.emplace_back(i, loop.resource_needs()); });
  return out;
}

TEST(JobControlLoop, CleanRunRequestsNoResources) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kAuto, true, true));
  RunJob(loop, 300, [](int, int64_t) { return 1.0; });
  EXPECT_TRUE(loop.resource_needs().workers.empty());
  EXPECT_EQ(loop.resource_needs().revision, 0);
}

TEST(JobControlLoop, AStragglerIsRequestedUntilItRecoversWithoutFlapping) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kSsgd, false, false));
  const auto needs = TrackNeeds(
      loop, 600, [](int w, int64_t i) { return (w == 2 && i >= 100 && i < 300) ? 3.0 : 1.0; }, 7, 0.7);
  std::optional<int64_t> first, last;
  for (const auto& [i, n] : needs) {
    if (n.workers.empty()) continue;
    ASSERT_EQ(n.workers.size(), 1u) << i;
    EXPECT_EQ(n.workers[0].worker, 2);
    EXPECT_EQ(n.workers[0].cause, api::StragglerCause::kCompute);
    EXPECT_GT(n.workers[0].slowdown, 1.2);
    if (!first) first = i;
    last = i;
  }
  ASSERT_TRUE(first.has_value()) << "the straggler was never requested";
  EXPECT_GE(*first, 100);
  EXPECT_GE(*last, 300) << "requested until it recovered";
  EXPECT_TRUE(loop.resource_needs().workers.empty()) << "recovered: everything goes back";
  EXPECT_EQ(loop.resource_needs().revision, 2) << "one request, one release: no flapping";
}

// Batch adaptation gives the static straggler fewer samples until every worker's
// iteration takes as long: the detector judges speed (compute at the equal batch), so the
// worker, still twice as slow, is not reported recovered and its batch stays small.
TEST(JobControlLoop, AStragglerGivenASmallerBatchStaysFlaggedWhileSlow) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kSsgd, false, true));
  RunJob(loop, 800, [](int w, int64_t i) { return (w == 2 && i >= 100) ? 2.0 : 1.0; });
  ASSERT_FALSE(Events(loop, "straggler", 2).empty()) << TimelineText(loop);
  ASSERT_FALSE(Events(loop, "batches", -1).empty()) << TimelineText(loop);
  EXPECT_TRUE(Events(loop, "recovered", 2).empty()) << TimelineText(loop);
  EXPECT_TRUE(loop.straggler_view(2).straggler);
}

// A neighbor that stays: what the worker is given makes it well (slow only while it is
// out of the request). Each release is followed by a return, and each return holds the
// worker twice as long as the one before (up to 16 x): the request changes ever more
// rarely instead of every few rounds.
TEST(JobControlLoop, AReturningNeedIsHeldLongerEachTime) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kSsgd, false, false));
  auto listed = [&] { return !loop.resource_needs().workers.empty(); };
  const auto needs = TrackNeeds(
      loop, 3000, [&](int w, int64_t i) { return (w == 2 && i >= 100 && !listed()) ? 3.0 : 1.0; }, 5,
      0.7);
  std::vector<int64_t> holds;  // iterations each stay in the request lasted
  std::optional<int64_t> entered;
  for (const auto& [i, n] : needs) {
    if (!n.workers.empty() && !entered) entered = i;
    if (n.workers.empty() && entered) {
      holds.push_back(i - *entered);
      entered.reset();
    }
  }
  ASSERT_GE(holds.size(), 3u) << "the neighbor stays: the worker returns after each release";
  for (size_t h = 1; h < holds.size(); ++h) {
    if (holds[h - 1] >= 16 * 5 * kReportEvery) break;  // the cap
    EXPECT_GT(holds[h], holds[h - 1]) << "hold " << h << " of " << ::testing::PrintToString(holds);
  }
  EXPECT_GE(holds.back(), 4 * holds.front()) << ::testing::PrintToString(holds);
}

// AMP hides a 4x contention completely (4.5x faster): the detector then sees no
// straggler, but the worker still needs resources while the contention lasts.
TEST(JobControlLoop, AWorkerOnAmpStaysRequestedWhileStillContended) {
  JobControlLoop loop = MakeLoop(Spec(api::SyncPolicy::kAuto, true, false));
  const auto needs = TrackNeeds(
      loop, 900, [](int w, int64_t i) { return (w == 2 && i >= 100 && i < 500) ? 4.0 : 1.0; }, 11,
      1 / 4.5);
  auto recovered = Events(loop, "recovered", 2);
  ASSERT_FALSE(recovered.empty());
  const double recovered_at = recovered.front()->t / 0.15;  // iteration
  ASSERT_LT(recovered_at, 480) << "the detector recovered the worker while AMP ran";
  for (const auto& [i, n] : needs) {
    if (i > recovered_at && i < 500) {
      ASSERT_EQ(n.workers.size(), 1u) << "iteration " << i;
      EXPECT_EQ(n.workers[0].worker, 2);
    }
  }
  EXPECT_TRUE(loop.resource_needs().workers.empty()) << "contention over: everything goes back";
  EXPECT_EQ(loop.resource_needs().revision, 2) << "no flapping";
}

TEST(JobControlLoop, ReallocationDisabledRequestsNothing) {
  api::TrainingJobSpec spec = Spec(api::SyncPolicy::kSsgd, false, false);
  spec.mitigation.resource_reallocation.enabled = false;
  JobControlLoop loop = MakeLoop(spec);
  RunJob(loop, 300, Severe());
  EXPECT_FALSE(loop.stragglers().empty());
  EXPECT_TRUE(loop.resource_needs().workers.empty());
  EXPECT_EQ(loop.resource_needs().revision, 0);
}

TEST(JobControlLoop, CreateRejectsBadOptionsAndSpecs) {
  LoopOptions o;
  o.decide_every_rounds = 0;
  StatusOr<JobControlLoop> l = JobControlLoop::Create(Spec(api::SyncPolicy::kAuto, true, true), o);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("decide_every_rounds"), std::string::npos);
  o = LoopOptions{};
  o.resource_release_rounds = 0;
  l = JobControlLoop::Create(Spec(api::SyncPolicy::kAuto, true, true), o);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().message(), "options.resource_release_rounds: must be >= 1, got 0");
  o = LoopOptions{};
  o.mode_switch_margin = 1;
  l = JobControlLoop::Create(Spec(api::SyncPolicy::kAuto, true, true), o);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("options.mode_switch_margin: must be in [0, 1)"), std::string::npos)
      << l.status();

  api::TrainingJobSpec bad = Spec(api::SyncPolicy::kAuto, true, true);
  bad.workers.replicas = 0;
  EXPECT_FALSE(JobControlLoop::Create(bad).ok());
}

}  // namespace
}  // namespace star::op
