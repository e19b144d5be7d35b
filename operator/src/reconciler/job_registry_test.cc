#include "star/operator/reconciler/job_registry.h"

#include "reconciler/loop_events.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace star::op {
namespace {

// A status after a merge patch (RFC 7386), as the API server applies it.
nlohmann::json Patched(nlohmann::json status, const nlohmann::json& patch) {
  status.merge_patch(patch);
  return status;
}

api::TrainingJobSpec Spec(int n) {
  api::TrainingJobSpec s;
  s.workers.replicas = n;
  s.training.global_batch_size = 64;
  s.training.target_accuracy = 0.9;
  s.mitigation.detection.window = 5;
  return s;
}

api::WorkerReport Report(const std::string& job, int w, int64_t it, double compute) {
  api::WorkerReport r;
  r.job = job;
  r.worker = w;
  r.iteration = it;
  r.time_seconds = static_cast<double>(it);
  r.compute_seconds = compute;
  r.communication_seconds = 0.01;
  r.local_batch = 16;
  return r;
}

TEST(JobRegistry, UnknownJobsHaveNoTokenAndTheirReportsAreNotFound) {
  JobRegistry reg([] { return std::string("2025-01-01T00:00:00Z"); });
  EXPECT_EQ(reg.Token("ns/a"), std::nullopt);
  auto r = reg.Observe(Report("ns/a", 0, 1, 0.1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(reg.Upsert("ns/a", 1, Spec(4), "tok").ok());
  EXPECT_EQ(reg.Token("ns/a"), "tok");
  reg.Remove("ns/a");
  EXPECT_FALSE(reg.Contains("ns/a"));
}

TEST(JobRegistry, AStragglerInTheReportsShowsUpInTheDrainedStatusAndEvents) {
  JobRegistry reg([] { return std::string("2025-01-01T00:00:00Z"); });
  ASSERT_TRUE(reg.Upsert("ns/a", 1, Spec(4), "tok").ok());
  reg.SetWorkerNodes("ns/a", {"n0", "n1", "n2", "n3"});
  EXPECT_TRUE(reg.Drain().empty()) << "no reports, nothing to write";
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  for (int64_t it = 1; it <= 80; ++it) {
    for (int w = 0; w < 4; ++w) {
      // Worker 3 becomes 4x slower at iteration 40.
      auto r = reg.Observe(Report("ns/a", w, it, (w == 3 && it >= 40 ? 0.4 : 0.1) * noise(rng)));
      ASSERT_TRUE(r.ok()) << r.status();
    }
  }
  // The loop decided (AMP for worker 3): status gets the decision once it is recorded.
  auto unrecorded = reg.Unrecorded("ns/a");
  ASSERT_TRUE(unrecorded.has_value());
  reg.Recorded("ns/a", *unrecorded);
  EXPECT_FALSE(reg.Unrecorded("ns/a").has_value());
  auto updates = reg.Drain();
  ASSERT_EQ(updates.size(), 1u);
  const JobUpdate& u = updates[0];
  EXPECT_EQ(u.status["decisionEpoch"], unrecorded->epoch);
  EXPECT_EQ(u.status["workers"][3]["amp"], true) << u.status.dump();
  EXPECT_EQ(u.key, "ns/a");
  EXPECT_EQ(u.status["iteration"], 80);
  ASSERT_EQ(u.status["stragglers"].size(), 1u) << u.status.dump();
  EXPECT_EQ(u.status["stragglers"][0]["worker"], 3);
  EXPECT_EQ(u.status["stragglers"][0]["node"], "n3");
  EXPECT_EQ(u.status["stragglers"][0]["cause"], "compute");
  EXPECT_EQ(u.status["stragglers"][0]["since"], "2025-01-01T00:00:00Z");
  const double slowdown = u.status["stragglers"][0]["slowdown"].get<double>();
  EXPECT_GT(slowdown, 2.0);
  EXPECT_DOUBLE_EQ(slowdown, std::round(slowdown * 100) / 100) << "rounded to 2 decimals";
  EXPECT_EQ(u.status["workers"].size(), 4u);
  bool straggler_event = false;
  for (const auto& e : u.events) straggler_event |= e.kind == EventKind::kStraggler && e.worker == 3;
  EXPECT_TRUE(straggler_event);
  EXPECT_TRUE(reg.Drain().empty()) << "drained once";
}

TEST(JobRegistry, TheUrgentListenerHearsOfAStragglerOnTheReportThatFlagsIt) {
  JobRegistry reg([] { return std::string("2025-01-01T00:00:00Z"); });
  ASSERT_TRUE(reg.Upsert("ns/a", 1, Spec(4), "tok").ok());
  std::vector<int64_t> heard;  // the iteration of each report the listener followed
  int64_t iteration = 0;
  reg.SetUrgentListener([&] { heard.push_back(iteration); });
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  for (iteration = 1; iteration <= 39; ++iteration) {
    for (int w = 0; w < 4; ++w) ASSERT_TRUE(reg.Observe(Report("ns/a", w, iteration, 0.1 * noise(rng))).ok());
  }
  EXPECT_TRUE(heard.empty()) << "no straggler, no need: nothing urgent (first at iteration " << heard[0] << ")";
  for (; iteration <= 80 && heard.empty(); ++iteration) {
    for (int w = 0; w < 4 && heard.empty(); ++w) {
      ASSERT_TRUE(reg.Observe(Report("ns/a", w, iteration, (w == 3 ? 0.4 : 0.1) * noise(rng))).ok());
    }
  }
  ASSERT_FALSE(heard.empty()) << "worker 3, 4x slower from iteration 40, was never urgent";
  bool flagged = false;
  for (const JobUpdate& u : reg.Drain()) {
    for (const TimelineEvent& e : u.events) flagged |= e.kind == EventKind::kStraggler && e.worker == 3;
  }
  EXPECT_TRUE(flagged) << "the listener was called at iteration " << heard[0] << " before any straggler";
}

TEST(JobRegistry, AnMlJobWithoutAModelDrainsOneSelectorFallbackThatIsAWarningEvent) {
  JobRegistry reg([] { return std::string(); }, LoopOptions{},
                  LearnedModel{nullptr, "model file \"/none/selector.json\": cannot open"});
  api::TrainingJobSpec ml = Spec(4);
  ml.synchronization.selector = api::ModeSelector::kMl;
  ASSERT_TRUE(reg.Upsert("ns/ml", 1, ml, "tok").ok());
  ASSERT_TRUE(reg.Upsert("ns/heuristic", 1, Spec(4), "tok").ok());
  for (int64_t it = 1; it <= 10; ++it) {
    for (int w = 0; w < 4; ++w) {
      ASSERT_TRUE(reg.Observe(Report("ns/ml", w, it, 0.1)).ok());
      ASSERT_TRUE(reg.Observe(Report("ns/heuristic", w, it, 0.1)).ok());
    }
  }
  std::vector<EventSpec> ml_events, heuristic_events;
  for (const JobUpdate& u : reg.Drain()) {
    for (const TimelineEvent& e : u.events) {
      (u.key == "ns/ml" ? ml_events : heuristic_events).push_back(EventOfLoopEvent(e));
    }
  }
  ASSERT_EQ(ml_events.size(), 1u);
  EXPECT_EQ(ml_events[0].type, "Warning");
  EXPECT_EQ(ml_events[0].reason, "LearnedSelectorUnavailable");
  EXPECT_NE(ml_events[0].message.find("/none/selector.json"), std::string::npos) << ml_events[0].message;
  EXPECT_TRUE(heuristic_events.empty()) << "selector Heuristic needs no model";

  // Once per loop: later drains do not repeat it.
  for (int w = 0; w < 4; ++w) ASSERT_TRUE(reg.Observe(Report("ns/ml", w, 11, 0.1)).ok());
  for (const JobUpdate& u : reg.Drain()) EXPECT_TRUE(u.events.empty());
}

TEST(JobRegistry, BeforeAnyDecisionTheStatusHasTheBaselineBatchesRemainderToTheLowestRanks) {
  JobRegistry reg([] { return std::string(); });
  api::TrainingJobSpec spec = Spec(4);
  spec.training.global_batch_size = 10;
  ASSERT_TRUE(reg.Upsert("ns/a", 1, spec, "tok").ok());
  for (int w = 0; w < 4; ++w) ASSERT_TRUE(reg.Observe(Report("ns/a", w, 1, 0.1)).ok());
  auto updates = reg.Drain();
  ASSERT_EQ(updates.size(), 1u);
  const nlohmann::json& status = updates[0].status;
  EXPECT_EQ(status["syncMode"], "ssgd");
  ASSERT_EQ(status["workers"].size(), 4u) << status.dump();
  const int64_t want[] = {3, 3, 2, 2};
  for (size_t w = 0; w < 4; ++w) {
    EXPECT_EQ(status["workers"][w]["batch"], want[w]) << w;
    EXPECT_EQ(status["workers"][w]["amp"], false) << w;
  }
}

TEST(JobRegistry, TheSnapshotCarriesTheLoopsResourceNeedsAndADrainSaysWhenTheyChanged) {
  JobRegistry reg([] { return std::string(); });
  api::TrainingJobSpec spec = Spec(4);
  spec.mitigation.resource_reallocation.enabled = true;
  spec.mitigation.amp.enabled = false;
  ASSERT_TRUE(reg.Upsert("ns/a", 1, spec, "tok").ok());
  const int64_t first_loop = reg.Snapshot("ns/a")->loop;
  EXPECT_EQ(reg.Snapshot("ns/a")->needs, ResourceNeeds{});
  std::mt19937_64 rng(5);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  for (int64_t it = 1; it <= 80; ++it) {
    for (int w = 0; w < 4; ++w) {
      ASSERT_TRUE(reg.Observe(Report("ns/a", w, it, (w == 2 && it >= 40 ? 0.4 : 0.1) * noise(rng))).ok());
    }
  }
  const ResourceNeeds needs = reg.Snapshot("ns/a")->needs;
  ASSERT_EQ(needs.workers.size(), 1u);
  EXPECT_EQ(needs.workers[0].worker, 2);
  EXPECT_EQ(needs.workers[0].cause, api::StragglerCause::kCompute);
  EXPECT_GT(needs.workers[0].slowdown, 2.0);
  EXPECT_GE(needs.revision, 1);
  auto updates = reg.Drain();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_TRUE(updates[0].needs_changed);
  ASSERT_TRUE(reg.Observe(Report("ns/a", 0, 81, 0.1)).ok());
  updates = reg.Drain();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_FALSE(updates[0].needs_changed) << "a report that leaves the needs as they were";

  spec.training.global_batch_size = 128;
  ASSERT_TRUE(reg.Upsert("ns/a", 2, spec, "tok").ok());
  EXPECT_NE(reg.Snapshot("ns/a")->loop, first_loop) << "a new loop, whose revisions start over";
  EXPECT_EQ(reg.Snapshot("ns/a")->needs, ResourceNeeds{});
}

TEST(JobRegistry, AnUnrecordedDecisionStaysOutOfTheDrainedStatus) {
  JobRegistry reg([] { return std::string(); });
  ASSERT_TRUE(reg.Upsert("ns/a", 1, Spec(4), "tok").ok());
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  for (int64_t it = 1; it <= 80; ++it) {
    for (int w = 0; w < 4; ++w) {
      ASSERT_TRUE(reg.Observe(Report("ns/a", w, it, (w == 1 && it >= 40 ? 0.4 : 0.1) * noise(rng))).ok());
    }
  }
  ASSERT_TRUE(reg.Unrecorded("ns/a").has_value());
  auto updates = reg.Drain();
  ASSERT_EQ(updates.size(), 1u);
  for (const char* k : {"syncMode", "workers", "decisionEpoch"}) {
    EXPECT_FALSE(updates[0].status.contains(k)) << k << " of a decision no worker has yet";
  }
}

TEST(JobRegistry, ANewLoopResumesFromTheRecordedDecisionOrTheOneItReplaces) {
  api::Decision d;
  d.epoch = 7;
  d.apply_at_iteration = 300;
  d.mode = api::SyncMode::kFixedK;
  d.k = 3;
  d.groups = {{0, 1, 3, 2}};
  for (int w = 0; w < 4; ++w) d.workers.push_back({w, w == 2, 64});
  // A restarted operator: the decision from status, round-tripped through its fields.
  auto from_status = DecisionFromStatus(Patched(nlohmann::json::object(), DecisionStatus(d)));
  ASSERT_TRUE(from_status.has_value());
  EXPECT_EQ(*from_status, d);
  EXPECT_TRUE(DecisionStatus(d).at("pipeline").is_null()) << "no schedule: a recorded one goes";
  JobRegistry reg([] { return std::string(); });
  ASSERT_TRUE(reg.Upsert("ns/a", 1, Spec(4), "tok", from_status).ok());
  auto snap = reg.Snapshot("ns/a");
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->mode, api::SyncMode::kFixedK);
  EXPECT_EQ(snap->epoch, 7);
  EXPECT_FALSE(reg.Unrecorded("ns/a").has_value()) << "it came from status: recorded";
  // A spec change with another worker count: the decision no longer fits, the epochs go on.
  api::TrainingJobSpec five = Spec(5);
  ASSERT_TRUE(reg.Upsert("ns/a", 2, five, "tok").ok());
  snap = reg.Snapshot("ns/a");
  EXPECT_EQ(snap->mode, api::SyncMode::kSsgd);
  std::mt19937_64 rng(5);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  std::optional<api::Decision> first;
  for (int64_t it = 1; it <= 80 && !first; ++it) {
    for (int w = 0; w < 5 && !first; ++w) {
      auto r = reg.Observe(Report("ns/a", w, it, (w == 4 && it >= 40 ? 0.4 : 0.1) * noise(rng)));
      ASSERT_TRUE(r.ok()) << r.status();
      if (*r) first = **r;
    }
  }
  ASSERT_TRUE(first.has_value()) << "worker 4 straggles: a decision";
  EXPECT_EQ(first->epoch, 8);
  EXPECT_FALSE(DecisionFromStatus(nlohmann::json{{"syncMode", "ssgd"}}).has_value()) << "no decisionEpoch";
}

TEST(JobRegistry, APipelinesScheduleRoundTripsThroughStatus) {
  api::Decision d;
  d.epoch = 4;
  d.apply_at_iteration = 90;
  d.k = 4;
  for (int w = 0; w < 4; ++w) d.workers.push_back({w, false, 64});
  d.warmup = {8, 8, 2, 1};
  d.predicted_iteration_seconds = 0.169;
  d.slow_link = 1;
  const nlohmann::json status = DecisionStatus(d);
  EXPECT_EQ(status.at("pipeline"),
            nlohmann::json::parse(R"({"warmup": [8, 8, 2, 1], "predictedIterationSeconds": 0.169,
                                      "slowLink": {"fromStage": 1, "toStage": 2}})"));
  auto back = DecisionFromStatus(Patched(nlohmann::json::object(), status));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, d);
  // The next decision is the static schedule: its patch takes the recorded one away.
  api::Decision plain = d;
  plain.epoch = 5;
  plain.warmup.clear();
  plain.predicted_iteration_seconds = 0;
  plain.slow_link = -1;
  const nlohmann::json after = Patched(Patched(nlohmann::json::object(), status), DecisionStatus(plain));
  EXPECT_FALSE(after.contains("pipeline")) << after;
  EXPECT_EQ(DecisionFromStatus(after), plain);
}

// Regression: a gang restart kept the old loop, which refused every report of the new
// workers (their iterations start over) until they passed the old count.
TEST(JobRegistry, AGangRestartStartsANewLoopThatResumesTheDecisionInForce) {
  JobRegistry reg([] { return std::string(); });
  ASSERT_TRUE(reg.Upsert("ns/a", 1, Spec(4), "tok", std::nullopt, /*restarts=*/0).ok());
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  for (int64_t it = 1; it <= 80; ++it) {
    for (int w = 0; w < 4; ++w) {
      ASSERT_TRUE(reg.Observe(Report("ns/a", w, it, (w == 1 && it >= 40 ? 0.4 : 0.1) * noise(rng))).ok());
    }
  }
  const std::optional<api::Decision> in_force = reg.Unrecorded("ns/a");
  ASSERT_TRUE(in_force.has_value()) << "worker 1 straggles: a decision";
  reg.Recorded("ns/a", *in_force);
  const int64_t loop_before = reg.Snapshot("ns/a")->loop;
  // The same generation and spec again: the same loop.
  ASSERT_TRUE(reg.Upsert("ns/a", 1, Spec(4), "tok", std::nullopt, 0).ok());
  EXPECT_EQ(reg.Snapshot("ns/a")->loop, loop_before);
  EXPECT_FALSE(reg.Observe(Report("ns/a", 0, 1, 0.1)).ok()) << "the old workers' loop refuses going back";

  ASSERT_TRUE(reg.Upsert("ns/a", 1, Spec(4), "tok", std::nullopt, /*restarts=*/1).ok());
  EXPECT_NE(reg.Snapshot("ns/a")->loop, loop_before);
  for (int w = 0; w < 4; ++w) {
    auto r = reg.ObserveReport(Report("ns/a", w, 1, 0.1));
    ASSERT_TRUE(r.ok()) << "the new workers count from 0: " << r.status();
    ASSERT_TRUE(r->recorded.has_value());
    EXPECT_EQ(*r->recorded, *in_force) << "the decision in force, resumed";
    EXPECT_FALSE(r->unrecorded);
  }
  EXPECT_EQ(reg.RecordedEpoch("ns/a"), in_force->epoch);
}

// A report's answer is the newest recorded decision: a new one waits for its record.
TEST(JobRegistry, AReportIsAnsweredWithTheRecordedDecisionUntilTheNewOneIsRecorded) {
  JobRegistry reg([] { return std::string(); });
  ASSERT_TRUE(reg.Upsert("ns/a", 1, Spec(4), "tok").ok());
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  std::optional<Observed> first_new;
  for (int64_t it = 1; it <= 80 && !first_new; ++it) {
    for (int w = 0; w < 4 && !first_new; ++w) {
      auto r = reg.ObserveReport(Report("ns/a", w, it, (w == 1 && it >= 40 ? 0.4 : 0.1) * noise(rng)));
      ASSERT_TRUE(r.ok()) << r.status();
      if (r->new_decision) first_new = *r;
    }
  }
  ASSERT_TRUE(first_new.has_value());
  EXPECT_TRUE(first_new->unrecorded);
  EXPECT_FALSE(first_new->recorded.has_value()) << "nothing recorded yet: no decision for the worker";
  auto again = reg.ObserveReport(Report("ns/a", 0, 80, 0.1));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->unrecorded);
  EXPECT_FALSE(again->recorded.has_value());
  reg.Recorded("ns/a", *first_new->decision);
  again = reg.ObserveReport(Report("ns/a", 0, 81, 0.1));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->unrecorded);
  EXPECT_EQ(again->recorded, first_new->decision);
}

TEST(JobRegistry, BadReportsAreRefusedNamingTheField) {
  JobRegistry reg([] { return std::string(); });
  ASSERT_TRUE(reg.Upsert("ns/a", 1, Spec(2), "tok").ok());
  auto r = reg.Observe(Report("ns/a", 7, 1, 0.1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("worker"), std::string::npos);
}

}  // namespace
}  // namespace star::op
