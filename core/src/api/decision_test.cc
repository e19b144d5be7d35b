#include "star/core/api/decision.h"

#include <functional>
#include <string>

#include <gtest/gtest.h>

namespace star::api {
namespace {

using nlohmann::json;

json GroupsDecision() {
  return json::parse(R"({
    "epoch": 7, "apply_at_iteration": 1200, "mode": "groups", "k": 2,
    "groups": [[0, 1], [3, 2]],
    "workers": [{"worker": 0, "amp": false, "batch": 72},
                {"worker": 1, "amp": false, "batch": 72},
                {"worker": 2, "amp": true, "batch": 40},
                {"worker": 3, "amp": false, "batch": 72}]
  })");
}

TEST(Decision, FullDocumentRoundTripsExactly) {
  const json doc = GroupsDecision();
  auto d = DecisionFromJson(doc);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->epoch, 7);
  EXPECT_EQ(d->apply_at_iteration, 1200);
  EXPECT_EQ(d->mode, SyncMode::kGroups);
  EXPECT_EQ(d->groups, (std::vector<std::vector<int>>{{0, 1}, {3, 2}}));
  ASSERT_EQ(d->workers.size(), 4u);
  EXPECT_EQ(d->workers[2], (WorkerSetting{2, true, 40}));
  EXPECT_EQ(ToJson(*d), doc);
}

TEST(Decision, StructWithEveryFieldSetRoundTrips) {
  Decision d;
  d.epoch = 3;
  d.apply_at_iteration = 99;
  d.mode = SyncMode::kFixedK;
  d.k = 3;
  d.groups = {{4}, {0, 2}, {1, 3}};
  d.workers = {{4, true, 10}, {0, false, 20}, {1, false, 30}, {2, true, 40}, {3, false, 50}};
  ASSERT_TRUE(Validate(d).ok()) << Validate(d);
  auto back = DecisionFromJson(ToJson(d));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, d);
}

TEST(Decision, WarmupIsWrittenOnlyWhenGivenAndRoundTrips) {
  Decision d;
  d.k = 1;
  EXPECT_FALSE(ToJson(d).contains("warmup"));
  EXPECT_FALSE(ToJson(d).contains("predicted_iteration_seconds"));
  EXPECT_FALSE(ToJson(d).contains("slow_link"));
  d.warmup = {8, 8, 2, 1};
  d.predicted_iteration_seconds = 0.25;
  d.slow_link = 2;
  const json j = ToJson(d);
  EXPECT_EQ(j["warmup"], json({8, 8, 2, 1}));
  EXPECT_EQ(j["predicted_iteration_seconds"], 0.25);
  EXPECT_EQ(j["slow_link"], 2);
  auto back = DecisionFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, d);
}

TEST(Decision, OptionalFieldsDefault) {
  auto d = DecisionFromJson(json::parse(
      R"({"epoch": 0, "apply_at_iteration": 0, "mode": "ssgd", "k": 4,
          "workers": [{"worker": 0, "batch": 8}]})"));
  // k 4 > 1 worker: rejected; without workers the same decision is fine.
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "k: must be <= the number of workers (1), got 4");
  auto e = DecisionFromJson(
      json::parse(R"({"epoch": 0, "apply_at_iteration": 0, "mode": "ssgd", "k": 4})"));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->groups.empty());
  EXPECT_TRUE(e->workers.empty());
  auto f = DecisionFromJson(json::parse(
      R"({"epoch": 0, "apply_at_iteration": 0, "mode": "asgd", "k": 1,
          "workers": [{"worker": 0, "batch": 8}]})"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->workers[0].amp);
}

struct BadCase {
  std::string name;
  std::function<void(json&)> mutate;
  std::string want;
};

class DecisionRejects : public testing::TestWithParam<BadCase> {};

TEST_P(DecisionRejects, WithExactFieldPath) {
  json doc = GroupsDecision();
  GetParam().mutate(doc);
  auto d = DecisionFromJson(doc, "decision");
  ASSERT_FALSE(d.ok()) << "accepted: " << doc.dump();
  EXPECT_EQ(d.status().message(), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, DecisionRejects,
    testing::Values(
        BadCase{"NotAnObject", [](json& d) { d = 3; }, "decision: must be an object, got integer"},
        BadCase{"MissingEpoch", [](json& d) { d.erase("epoch"); },
                "decision.epoch: required field is missing"},
        BadCase{"NegativeEpoch", [](json& d) { d["epoch"] = -1; },
                "decision.epoch: must be >= 0, got -1"},
        BadCase{"MissingApplyAt", [](json& d) { d.erase("apply_at_iteration"); },
                "decision.apply_at_iteration: required field is missing"},
        BadCase{"NegativeApplyAt", [](json& d) { d["apply_at_iteration"] = -5; },
                "decision.apply_at_iteration: must be >= 0, got -5"},
        BadCase{"BadMode", [](json& d) { d["mode"] = "FixedK"; },
                "decision.mode: must be one of ssgd, fixed_k, groups, asgd, got \"FixedK\""},
        BadCase{"MissingK", [](json& d) { d.erase("k"); }, "decision.k: required field is missing"},
        BadCase{"ZeroK", [](json& d) { d["k"] = 0; }, "decision.k: must be >= 1, got 0"},
        BadCase{"KAboveWorkers", [](json& d) { d["k"] = 5; },
                "decision.k: must be <= the number of workers (4), got 5"},
        BadCase{"KNotInteger", [](json& d) { d["k"] = 1.5; },
                "decision.k: must be an integer, got 1.5"},
        BadCase{"GroupsNotArray", [](json& d) { d["groups"] = "0,1"; },
                "decision.groups: must be an array, got string"},
        BadCase{"GroupNotArray", [](json& d) { d["groups"][1] = 2; },
                "decision.groups[1]: must be an array, got integer"},
        BadCase{"GroupMemberNotInteger", [](json& d) { d["groups"][1][0] = "3"; },
                "decision.groups[1][0]: must be an integer, got string"},
        BadCase{"GroupMemberTooLarge", [](json& d) { d["groups"][1][0] = 3000000000LL; },
                "decision.groups[1][0]: must fit in a 32-bit integer, got 3000000000"},
        BadCase{"GroupsEmptyInGroupsMode", [](json& d) { d["groups"] = json::array(); },
                "decision.groups: must not be empty when mode is groups"},
        BadCase{"EmptyGroup", [](json& d) { d["groups"][1] = json::array(); },
                "decision.groups[1]: must not be empty"},
        BadCase{"DuplicateRankAcrossGroups", [](json& d) { d["groups"][1][0] = 1; },
                "decision.groups[1][0]: duplicate of decision.groups[0][1]"},
        BadCase{"NegativeRankInGroup", [](json& d) { d["groups"][0][0] = -1; },
                "decision.groups[0][0]: must be >= 0, got -1"},
        BadCase{"GroupRankNotAWorker", [](json& d) { d["groups"][1][0] = 9; },
                "decision.groups[1][0]: worker 9 is not in workers"},
        BadCase{"GroupsMissAWorker", [](json& d) { d["groups"][1] = {3}; },
                "decision.groups: must cover every worker, worker 2 is in no group"},
        BadCase{"WorkersNotArray", [](json& d) { d["workers"] = json::object(); },
                "decision.workers: must be an array, got object"},
        BadCase{"WorkerMissingBatch", [](json& d) { d["workers"][2].erase("batch"); },
                "decision.workers[2].batch: required field is missing"},
        BadCase{"WorkerZeroBatch", [](json& d) { d["workers"][2]["batch"] = 0; },
                "decision.workers[2].batch: must be >= 1, got 0"},
        BadCase{"WorkerAmpNotBool", [](json& d) { d["workers"][0]["amp"] = 1; },
                "decision.workers[0].amp: must be a boolean, got integer"},
        BadCase{"WorkerNegativeRank", [](json& d) { d["workers"][0]["worker"] = -2; },
                "decision.workers[0].worker: must be >= 0, got -2"},
        BadCase{"DuplicateWorker", [](json& d) { d["workers"][3]["worker"] = 1; },
                "decision.workers[3].worker: duplicate of decision.workers[1]"},
        BadCase{"UnknownWorkerField", [](json& d) { d["workers"][0]["precision"] = "bf16"; },
                "decision.workers[0].precision: unknown field"},
        BadCase{"WarmupNotArray", [](json& d) { d["warmup"] = 4; },
                "decision.warmup: must be an array, got integer"},
        BadCase{"ZeroWarmup", [](json& d) { d["warmup"] = {4, 0}; },
                "decision.warmup[1]: must be >= 1, got 0"},
        BadCase{"WarmupDeeperDownstream", [](json& d) { d["warmup"] = {4, 3, 5, 1}; },
                "decision.warmup[2]: must be <= decision.warmup[1] (3): a stage deeper than the "
                "one before it waits for activations never sent, got 5"},
        BadCase{"NegativePrediction",
                [](json& d) {
                  d["warmup"] = {2, 1};
                  d["predicted_iteration_seconds"] = -0.5;
                },
                "decision.predicted_iteration_seconds: must be a finite number >= 0, got -0.5"},
        BadCase{"PredictionWithoutWarmup", [](json& d) { d["predicted_iteration_seconds"] = 0.5; },
                "decision.predicted_iteration_seconds: only with warmup"},
        BadCase{"SlowLinkWithoutWarmup", [](json& d) { d["slow_link"] = 0; },
                "decision.slow_link: must be -1 without a warmup, got 0"},
        BadCase{"SlowLinkPastTheLastStage",
                [](json& d) {
                  d["warmup"] = {2, 2, 1};
                  d["slow_link"] = 2;
                },
                "decision.slow_link: must be -1 or in [0, 2), got 2"},
        BadCase{"UnknownField", [](json& d) { d["deadline"] = 3; },
                "decision.deadline: unknown field"}),
    [](const testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(Decision, ValidateChecksGroupsWithoutWorkers) {
  Decision d;
  d.mode = SyncMode::kGroups;
  d.k = 2;
  d.groups = {{0, 1}, {2}};
  EXPECT_TRUE(Validate(d).ok()) << Validate(d);
  d.groups = {{0, 1}, {1}};
  EXPECT_EQ(Validate(d).message(), "groups[1][0]: duplicate of groups[0][1]");
}

TEST(Decision, SameSynchronizationIgnoresBatchesAmpAndWhen) {
  Decision a;
  a.mode = SyncMode::kFixedK;
  a.k = 3;
  a.groups = {{2, 0, 1, 3}};
  a.workers = {{0, false, 32}, {1, false, 32}, {2, false, 32}, {3, false, 32}};
  Decision b = a;
  b.epoch = 7;
  b.apply_at_iteration = 40;
  b.workers = {{0, false, 40}, {1, false, 40}, {2, true, 16}, {3, false, 32}};
  EXPECT_TRUE(SameSynchronization(a, b));
  b.k = 2;
  EXPECT_FALSE(SameSynchronization(a, b));
  b.k = 3;
  b.groups = {{0, 2, 1, 3}};
  EXPECT_FALSE(SameSynchronization(a, b)) << "fixed_k's order names the ring";
  b.mode = SyncMode::kGroups;
  EXPECT_FALSE(SameSynchronization(a, b));
}

TEST(Decision, SameSynchronizationComparesGroupsButNotSsgdsK) {
  Decision a, b;
  a.k = 4;
  b.k = 1;
  EXPECT_TRUE(SameSynchronization(a, b)) << "ssgd waits for every worker whatever k says";
  a.mode = b.mode = SyncMode::kGroups;
  a.groups = {{0, 1}, {2, 3}};
  b.groups = {{0, 1}, {2, 3}};
  EXPECT_TRUE(SameSynchronization(a, b));
  b.groups = {{0, 1, 2}, {3}};
  EXPECT_FALSE(SameSynchronization(a, b));
}

}  // namespace
}  // namespace star::api
