#include "sim/command.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <iterator>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "trace_csv.h"
#ifdef STAR_HAVE_XGBOOST
#include <random>

#include "star/operator/xgboost_selector.h"
#endif

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

TEST_F(SimCommand, APipelineRunsUnderAutoAndSsgdOnly) {
  const json pipeline = json::parse(R"({"workers": 4, "batch_per_worker": 64, "noise_scale": 0,
    "min_updates": 40, "communication_seconds": 0,
    "pipeline": {"stages": 4, "micro_batches": 8, "forward_seconds": [0.002, 0.002, 0.002, 0.002],
                 "backward_seconds": [0.004, 0.004, 0.004, 0.004],
                 "activation_seconds": 0.0001, "gradient_seconds": 0.0001},
    "episodes": [{"worker": 1, "peer": 2, "delay": 0.02}]})");
  SimArgs a;
  a.scenario = Write("p.json", pipeline);
  a.policy = "all";
  ASSERT_EQ(Run(a), 0) << err_.str();
  const json j = json::parse(out_.str());
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["policy"], "auto");
  EXPECT_EQ(j["results"][1]["policy"], "ssgd");
  EXPECT_TRUE(j["results"][1]["static_iteration_seconds"].is_number());
  EXPECT_TRUE(j["results"][1]["adapted_iteration_seconds"].is_null());
  a.policy = "asgd";
  EXPECT_EQ(Run(a), 1);
  EXPECT_EQ(err_.str(), "star: --policy: a pipeline scenario runs under auto or ssgd, got \"asgd\"\n");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(SimCommand, ABimodalCohortIsDecidedOnceAndAutoMatchesTheBestPolicy) {
  // examples/sim/bimodal.json: 5 of 10 workers 3x slower from the start. The slow half
  // is flagged as static stragglers once, not on every sample, so the loop decides a few
  // times only, and auto ends no later than any single policy.
  json s = json::parse(R"({"architecture": "AllReduce", "workers": 10, "batch_per_worker": 32,
      "noise_scale": 1000, "min_updates": 2000, "compute_seconds_per_sample": 0.002,
      "communication_seconds": 0.02, "jitter": 0.05, "episodes": [], "seed": 1})");
  for (int w = 0; w < 5; ++w) s["episodes"].push_back({{"worker", w}, {"start", 0}, {"cpu", 0.3333}});
  SimArgs a;
  a.scenario = Write("bimodal.json", s);
  a.policy = "all";
  ASSERT_EQ(Run(a), 0) << err_.str();
  const json results = json::parse(out_.str())["results"];
  const json& automatic = results[0];
  ASSERT_EQ(automatic["policy"], "auto");
  ASSERT_TRUE(automatic["tta_seconds"].is_number());
  EXPECT_GE(automatic["decisions"].get<int>(), 1);
  EXPECT_LE(automatic["decisions"].get<int>(), 3);
  for (const json& r : results) {
    if (r["tta_seconds"].is_number()) {
      EXPECT_LE(automatic["tta_seconds"].get<double>(), r["tta_seconds"].get<double>()) << r;
    }
  }
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
  EXPECT_FALSE(fs::exists(a.trace + ".partial"));
}

// Regression: with --trace and --timeline, an unwritable --timeline failed after --trace had
// already emptied its file; a run that fails now leaves both files as they were.
TEST_F(SimCommand, ARunThatFailsLeavesItsOutputFilesAsTheyWere) {
  SimArgs a;
  a.scenario = Write("s.json", Scenario());
  a.policy = "ssgd";
  a.trace = (dir_ / "trace.csv").string();
  std::ofstream(a.trace) << "old";
  a.timeline = (dir_ / "missing" / "timeline.json").string();
  EXPECT_EQ(Run(a), 1);
  EXPECT_NE(err_.str().find("--timeline: cannot write"), std::string::npos) << err_.str();
  std::ifstream f(a.trace);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "old");
  EXPECT_FALSE(fs::exists(a.trace + ".partial"));
}

TEST_F(SimCommand, TimelineHoldsEachPolicysControlLoopEvents) {
  SimArgs a;
  a.scenario = Write("s.json", Scenario());
  a.policy = "all";
  a.timeline = (dir_ / "timeline.json").string();
  ASSERT_EQ(Run(a), 0) << err_.str();
  const json results = json::parse(out_.str())["results"];
  std::ifstream f(a.timeline);
  const json timelines = json::parse(f)["timelines"];
  ASSERT_EQ(timelines.size(), results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string policy = results[i]["policy"];
    EXPECT_EQ(timelines[i]["policy"], policy);
    int modes = 0;
    for (const json& e : timelines[i]["timeline"]) {
      ASSERT_TRUE(e.contains("t") && e.contains("worker") && e.contains("detail")) << e;
      if (e["event"] != "mode") continue;
      ++modes;
      if (policy == "fixed-k") {
        EXPECT_EQ(e["detail"].get<std::string>().rfind("fixed_k k=", 0), 0u) << e;
      }
    }
    // Forced SSGD never changes the mode; forced fixed-k goes to fixed_k once measured.
    if (policy == "ssgd") {
      EXPECT_EQ(modes, 0);
    } else if (policy == "fixed-k") {
      EXPECT_GE(modes, 1);
    }
  }
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
      {[](json&, SimArgs& a) { a.timeline = "/nonexistent/dir/t.json"; },
       "--timeline: cannot write \"/nonexistent/dir/t.json\""},
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

// Regression: `--selector ml --model FILE` only checked that FILE opened and then ran the
// heuristic; a file that is no selector model is now an error naming it.
TEST_F(SimCommand, MlSelectorWithAFileThatIsNoModelIsAnErrorNamingIt) {
  SimArgs a;
  a.scenario = Write("s.json", Scenario());
  a.selector = "ml";
  a.model = Write("model.json", json::object());
  a.policy = "auto";
  EXPECT_EQ(Run(a), 1);
  EXPECT_EQ(out_.str(), "");
  EXPECT_NE(err_.str().find("--model: model file \"" + a.model + "\""), std::string::npos) << err_.str();
}

#ifdef STAR_HAVE_XGBOOST
// A model trained in-test that picks fixed_k at a quarter of the workers whatever it sees,
// sure enough of it (enough rounds) to clear the loop's override margin.
std::string TrainQuarterFixedKModel(const std::string& path) {
  op::SelectorTrainingSet set;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(0, 1);
  for (int r = 0; r < 64; ++r) {
    for (std::size_t f = 0; f < select::kSelectorFeatureCount; ++f) set.features.push_back(u(rng));
    set.labels.push_back(select::kSelectorClassFixedKFirst);  // fraction 0.25
  }
  op::SelectorTrainOptions o;
  o.seed = 5;
  o.rounds = 20;
  o.max_depth = 2;
  auto model = op::XgboostSelector::Train(set, o);
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) {
    EXPECT_TRUE((*model)->Save(path).ok());
  }
  return path;
}

TEST_F(SimCommand, MlSelectorRunsTheModelItIsGiven) {
  SimArgs a;
  json s = Scenario();
  s["episodes"][0].erase("end");  // a straggler the loop decides a mode for: 1.8x
  s["episodes"][0]["cpu"] = 0.25;  // (0.4 is 1.4x of the slow ring: ordinary heterogeneity)
  s["amp_available"] = false;      // (rather than AMP's)
  a.scenario = Write("s.json", s);
  a.policy = "auto";
  ASSERT_EQ(Run(a), 0) << err_.str();
  const json heuristic = json::parse(out_.str())["results"][0];

  a.selector = "ml";
  a.model = TrainQuarterFixedKModel((dir_ / "selector.json").string());
  ASSERT_EQ(Run(a), 0) << err_.str();
  const std::string first = out_.str();
  const json ml = json::parse(first)["results"][0];
  EXPECT_EQ(ml["policy"], "auto");
  EXPECT_GE(ml["decisions"].get<int>(), 1);
  EXPECT_NE(ml, heuristic) << "the model, not the heuristic, chose the mode";
  ASSERT_EQ(Run(a), 0);
  EXPECT_EQ(out_.str(), first) << "deterministic for the scenario, its seed and the model";
}
#endif

}  // namespace
}  // namespace star::sim
