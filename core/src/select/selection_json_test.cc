#include <string>

#include <gtest/gtest.h>

#include "star/core/select/selector.h"

namespace star::select {
namespace {

using nlohmann::json;

json Valid() {
  return json::parse(R"({"architecture":"ParameterServer","batch_per_worker":32,
                         "noise_scale":512.5,"iteration_seconds":[0.5,0.52,1.5]})");
}

TEST(SelectionInputFromJson, DecodesTheContractInput) {
  auto in = SelectionInputFromJson(Valid());
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->architecture, api::Architecture::kParameterServer);
  EXPECT_EQ(in->batch_per_worker, 32);
  EXPECT_EQ(in->noise_scale, 512.5);
  EXPECT_EQ(in->iteration_seconds, (std::vector<double>{0.5, 0.52, 1.5}));
}

TEST(SelectionInputFromJson, RoundTripsThroughToJson) {
  auto in = SelectionInputFromJson(Valid());
  ASSERT_TRUE(in.ok());
  auto again = SelectionInputFromJson(ToJson(*in));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ToJson(*again), ToJson(*in));
  EXPECT_EQ(ToJson(*in), Valid());
}

TEST(SelectionInputFromJson, RejectsMalformedInputNamingTheField) {
  struct Case {
    const char* what;
    json doc;
    std::string message;
  };
  auto with = [](const char* key, json value) {
    json j = Valid();
    j[key] = std::move(value);
    return j;
  };
  auto without = [](const char* key) {
    json j = Valid();
    j.erase(key);
    return j;
  };
  const Case cases[] = {
      {"missing architecture", without("architecture"),
       "architecture: required field is missing"},
      {"missing batch", without("batch_per_worker"), "batch_per_worker: required field is missing"},
      {"missing noise", without("noise_scale"), "noise_scale: required field is missing"},
      {"missing times", without("iteration_seconds"),
       "iteration_seconds: required field is missing"},
      {"unknown architecture", with("architecture", "Ring"),
       "architecture: must be one of AllReduce, ParameterServer, got \"Ring\""},
      {"architecture type", with("architecture", 3), "architecture: must be a string, got integer"},
      {"batch type", with("batch_per_worker", "32"),
       "batch_per_worker: must be a number, got string"},
      {"zero batch", with("batch_per_worker", 0), "batch_per_worker: must be > 0, got 0"},
      {"negative noise", with("noise_scale", -1), "noise_scale: must be >= 0, got -1"},
      {"times type", with("iteration_seconds", 0.5),
       "iteration_seconds: must be an array, got number"},
      {"empty times", with("iteration_seconds", json::array()),
       "iteration_seconds: must not be empty"},
      {"negative time", with("iteration_seconds", {0.5, -1.0}),
       "iteration_seconds[1]: must be > 0, got -1"},
      {"zero time", with("iteration_seconds", {0.0}), "iteration_seconds[0]: must be > 0, got 0"},
      {"time type", with("iteration_seconds", {0.5, "fast"}),
       "iteration_seconds[1]: must be a number, got string"},
      {"unknown field", with("workers", 3), "workers: unknown field"},
      {"not an object", json::array({1, 2}), "document: must be an object, got array"},
  };
  for (const Case& c : cases) {
    auto in = SelectionInputFromJson(c.doc);
    ASSERT_FALSE(in.ok()) << c.what;
    EXPECT_EQ(in.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_EQ(in.status().message(), c.message) << c.what;
  }
}

TEST(SelectionToJson, HasExactlyTheContractKeys) {
  auto in = SelectionInputFromJson(Valid());
  ASSERT_TRUE(in.ok());
  auto s = Select(*in);
  ASSERT_TRUE(s.ok());
  const json j = ToJson(*s);
  ASSERT_EQ(j.size(), 4u) << j.dump();
  EXPECT_TRUE(j["mode"].is_string());
  EXPECT_EQ(api::ParseSyncMode(j["mode"].get<std::string>()), s->mode);
  EXPECT_EQ(j["k"], s->k);
  EXPECT_EQ(j["groups"], json(s->groups));
  EXPECT_EQ(j["estimated_seconds_per_progress"], s->estimated_seconds_per_progress);

  const json full = ToJson(*s, /*include_candidates=*/true);
  EXPECT_EQ(full.size(), 5u);
  ASSERT_EQ(full["candidates"].size(), s->candidates.size());
  EXPECT_EQ(full["candidates"][0]["mode"], "ssgd");
  EXPECT_TRUE(full["candidates"][0].contains("update_interval_seconds"));
}

TEST(SelectionToJson, WritesTheWireNamesOfEveryMode) {
  Selection s;
  s.k = 3;
  s.groups = {{0, 2}, {1}};
  s.estimated_seconds_per_progress = 1.5;
  for (auto [mode, name] : {std::pair{api::SyncMode::kSsgd, "ssgd"},
                            std::pair{api::SyncMode::kFixedK, "fixed_k"},
                            std::pair{api::SyncMode::kGroups, "groups"},
                            std::pair{api::SyncMode::kAsgd, "asgd"}}) {
    s.mode = mode;
    EXPECT_EQ(ToJson(s),
              json::parse(std::string(R"({"mode":")") + name +
                          R"(","k":3,"groups":[[0,2],[1]],"estimated_seconds_per_progress":1.5})"));
  }
}

}  // namespace
}  // namespace star::select
