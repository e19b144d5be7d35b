#include "sim/command.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "trace_csv.h"

namespace star::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class SimCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("star_sim_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const json& j) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << j.dump();
    return p.string();
  }

  static json Scenario() {
    return json::parse(R"({"architecture": "AllReduce", "workers": 8, "batch_per_worker": 32,
      "noise_scale": 256, "min_updates": 50,
      "compute_seconds_per_sample": 0.002, "communication_seconds": 0.05, "jitter": 0.05,
      "episodes": [{"worker": 3, "start": 1, "end": 4, "cpu": 0.4},
                   {"worker": 7, "start": 0, "bandwidth": 0.3}],
      "seed": 1})");
  }

  int Run(SimArgs args) {
    out_.str("");
    err_.str("");
    return RunSimCommand(args, out_, err_);
  }

  fs::path dir_;
  std::ostringstream out_, err_;
};

TEST_F(SimCommand, PolicyAllPrintsOneResultPerPolicy) {
  SimArgs a;
  a.scenario = Write("s.json", Scenario());
  a.policy = "all";
  ASSERT_EQ(Run(a), 0) << err_.str();
  const json j = json::parse(out_.str());
  ASSERT_EQ(j["results"].size(), 7u);
  std::vector<std::string> policies;
  for (const json& r : j["results"]) {
    policies.push_back(r["policy"]);
    EXPECT_TRUE(r["tta_seconds"].is_number() || r["tta_seconds"].is_null());
    EXPECT_TRUE(r["updates"].is_number_integer());
    EXPECT_TRUE(r["iterations"].is_number_integer());
    EXPECT_TRUE(r["decisions"].is_number_integer());
  }
  EXPECT_EQ(policies, (std::vector<std::string>{"auto", "ssgd", "asgd", "fixed-k", "groups",
                                                "amp", "boa"}));
  EXPECT_EQ(err_.str(), "");
}

TEST_F(SimCommand, SeedReplacesTheScenarios) {
  SimArgs a;
  a.scenario = Write("s.json", Scenario());
  a.policy = "ssgd";
  ASSERT_EQ(Run(a), 0);
  const std::string seed1 = out_.str();
  a.seed = 1;
  ASSERT_EQ(Run(a), 0);
  EXPECT_EQ(out_.str(), seed1);
  a.seed = 2;
  ASSERT_EQ(Run(a), 0);
  EXPECT_NE(out_.str(), seed1);
}

TEST_F(SimCommand, TraceIsStarDetectsCsv) {
  SimArgs a;
  a.scenario = Write("s.json", Scenario());
  a.policy = "ssgd";
  a.trace = (dir_ / "trace.csv").string();
  ASSERT_EQ(Run(a), 0) << err_.str();
  std::ifstream f(a.trace);
  auto samples = cli::ParseTraceCsv(f, a.trace);
  ASSERT_TRUE(samples.ok()) << samples.status();
  const json j = json::parse(out_.str());
  EXPECT_EQ(samples->size(), 8u * j["results"][0]["iterations"].get<size_t>());
}

TEST_F(SimCommand, BadInputIsRefusedNamingTheFieldWithNothingOnStdout) {
  struct Case {
    std::function<void(json&, SimArgs&)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](json& j, SimArgs&) { j["workers"] = 0; }, "workers: must be >= 1, got 0"},
      {[](json& j, SimArgs&) { j["episodes"][1]["cpu"] = 2; },
       "episodes[1].cpu: must be in (0, 1], got 2"},
      {[](json&, SimArgs& a) { a.policy = "fastest"; }, "--policy: must be one of"},
      {[](json&, SimArgs& a) { a.selector = "oracle"; }, "--selector: must be one of heuristic, ml"},
      {[](json&, SimArgs& a) {
         a.selector = "ml";
         a.model = "/nonexistent/model.json";
       },
       "--model: cannot open \"/nonexistent/model.json\""},
      {[](json&, SimArgs& a) { a.model = "/nonexistent/model.json"; }, "--model: only with --selector ml"},
      {[](json&, SimArgs& a) { a.seed = -1; }, "--seed: must be >= 0, got -1"},
      {[](json&, SimArgs& a) {
         a.policy = "all";
         a.trace = "t.csv";
       },
       "--trace: needs a single --policy"},
  };
  for (const Case& c : cases) {
    json j = Scenario();
    SimArgs a;
    c.change(j, a);
    a.scenario = Write("s.json", j);
    EXPECT_EQ(Run(a), 1) << c.message;
    EXPECT_EQ(out_.str(), "") << c.message;
    EXPECT_NE(err_.str().find(c.message), std::string::npos) << err_.str();
  }
  SimArgs missing;
  missing.scenario = (dir_ / "none.json").string();
  EXPECT_EQ(Run(missing), 1);
  EXPECT_EQ(out_.str(), "");
  EXPECT_NE(err_.str().find("none.json"), std::string::npos) << err_.str();
}

TEST_F(SimCommand, MlSelectorWithAModelFileRuns) {
  SimArgs a;
  a.scenario = Write("s.json", Scenario());
  a.selector = "ml";
  a.model = Write("model.json", json::object());
  a.policy = "auto";
  ASSERT_EQ(Run(a), 0) << err_.str();
  EXPECT_EQ(json::parse(out_.str())["results"].size(), 1u);
}

}  // namespace
}  // namespace star::sim
