// Runs the real `star` binary against files and checks the command-line contracts of
// docs/ARCHITECTURE.md: JSON on stdout, errors on stderr with a non-zero exit.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class StarCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("star_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  static std::string Slurp(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  Result Run(const std::string& args) {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    // stdin is /dev/null unless `args` redirects it (the later redirection wins).
    std::string cmd = std::string(STAR_BINARY) + " </dev/null " + args + " >" + out.string() +
                      " 2>" + err.string();
    int rc = std::system(cmd.c_str());
    Result r;
    r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.out = Slurp(out);
    r.err = Slurp(err);
    return r;
  }

  static std::vector<json> Lines(const std::string& text) {
    std::vector<json> v;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) v.push_back(json::parse(line));
    }
    return v;
  }

  fs::path dir_;
};

std::string Trace(int workers, int iterations, int slow_worker, int slow_from, int slow_to,
                  double compute_factor, double comm_factor) {
  std::ostringstream s;
  s << "iteration,worker,compute_seconds,communication_seconds\n";
  for (int it = 0; it < iterations; ++it) {
    for (int w = 0; w < workers; ++w) {
      // Deterministic jitter of +-3% so the windows are not degenerate.
      double jitter = 1.0 + 0.03 * (((it * 7 + w * 13) % 11) - 5) / 5.0;
      double c = 0.1 * jitter, m = 0.02 * jitter;
      if (w == slow_worker && it >= slow_from && it < slow_to) {
        c *= compute_factor;
        m *= comm_factor;
      }
      s << it << "," << w << "," << c << "," << m << "\n";
    }
  }
  return s.str();
}

TEST_F(StarCli, HelpListsTheVerbs) {
  Result r = Run("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* verb : {"detect", "select", "plan-batches"}) {
    EXPECT_NE(r.out.find(verb), std::string::npos) << verb;
  }
}

TEST_F(StarCli, UnknownVerbIsAUsageError) {
  Result r = Run("frobnicate");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(r.out.empty());
  EXPECT_FALSE(r.err.empty());
}

TEST_F(StarCli, DetectReportsOnsetAndRecoveryOfTheSlowWorker) {
  std::string trace = Write("t.csv", Trace(4, 200, 2, 80, 140, 2.5, 1.0));
  Result r = Run("detect --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto events = Lines(r.out);
  ASSERT_GE(events.size(), 2u) << r.out;
  const json& onset = events.front();
  EXPECT_EQ(onset.at("worker"), 2);
  EXPECT_EQ(onset.at("state"), "straggler");
  EXPECT_EQ(onset.at("cause"), "compute");
  EXPECT_TRUE(onset.at("kind") == "dynamic" || onset.at("kind") == "static");
  EXPECT_GE(onset.at("iteration").get<int64_t>(), 80);
  EXPECT_LT(onset.at("iteration").get<int64_t>(), 140);
  EXPECT_GT(onset.at("slowdown").get<double>(), 1.5);
  EXPECT_EQ(std::set<std::string>({"iteration", "worker", "state", "cause", "kind", "slowdown"}),
            [&] {
              std::set<std::string> keys;
              for (auto& [k, v] : onset.items()) keys.insert(k);
              return keys;
            }());
  const json& last = events.back();
  EXPECT_EQ(last.at("worker"), 2);
  EXPECT_EQ(last.at("state"), "recovered");
  EXPECT_GE(last.at("iteration").get<int64_t>(), 140);
  EXPECT_EQ(last.size(), 3u);
  for (const json& e : events) EXPECT_EQ(e.at("worker"), 2) << e;
}

TEST_F(StarCli, DetectAttributesCommunicationStragglers) {
  std::string trace = Write("t.csv", Trace(4, 200, 1, 60, 150, 1.0, 6.0));
  Result r = Run("detect --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto events = Lines(r.out);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().at("worker"), 1);
  EXPECT_EQ(events.front().at("cause"), "communication");
}

TEST_F(StarCli, DetectIsQuietOnACleanTrace) {
  std::string trace = Write("t.csv", Trace(6, 200, -1, 0, 0, 1.0, 1.0));
  Result r = Run("detect --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(StarCli, DetectRunsEveryRule) {
  std::string trace = Write("t.csv", Trace(4, 200, 3, 50, 150, 3.0, 1.0));
  for (const char* rule : {"mad", "relative", "star", "change_point"}) {
    Result r = Run(std::string("detect --rule ") + rule + " --trace " + trace);
    ASSERT_EQ(r.exit_code, 0) << rule << ": " << r.err;
    auto events = Lines(r.out);
    ASSERT_FALSE(events.empty()) << rule;
    EXPECT_EQ(events.front().at("worker"), 3) << rule;
    EXPECT_EQ(events.front().at("state"), "straggler") << rule;
  }
}

TEST_F(StarCli, DetectStepPathFlagsALargeStepInTwoSamples) {
  std::string trace = Write("t.csv", Trace(4, 200, 3, 50, 150, 3.0, 1.0));
  Result step = Run("detect --trace " + trace);
  Result off = Run("detect --step-slowdown 0 --trace " + trace);
  ASSERT_EQ(step.exit_code, 0) << step.err;
  ASSERT_EQ(off.exit_code, 0) << off.err;
  auto s = Lines(step.out), o = Lines(off.out);
  ASSERT_FALSE(s.empty());
  ASSERT_FALSE(o.empty());
  EXPECT_EQ(s.front().at("worker"), 3);
  EXPECT_LE(s.front().at("iteration").get<int64_t>(), 50 + 2);
  EXPECT_LT(s.front().at("iteration").get<int64_t>(), o.front().at("iteration").get<int64_t>());
  EXPECT_EQ(s.back().at("state"), "recovered");

  for (const char* flags : {"--step-slowdown 1", "--step-samples 0", "--step-samples 11"}) {
    Result bad = Run(std::string("detect ") + flags + " --trace " + trace);
    EXPECT_NE(bad.exit_code, 0) << flags;
    EXPECT_EQ(bad.out, "") << flags;
    const std::string flag = std::string(flags).substr(0, std::string(flags).find(' '));
    EXPECT_NE(bad.err.find(flag + ":"), std::string::npos) << bad.err;
  }
}

TEST_F(StarCli, DetectKeepsABimodalCohortSteady) {
  // Workers 0-4 three times slower than 5-9 for the whole run: five static stragglers,
  // flagged once each and never recovered.
  std::ostringstream t;
  t << "iteration,worker,compute_seconds,communication_seconds\n";
  for (int it = 0; it < 300; ++it) {
    for (int w = 0; w < 10; ++w) {
      const double jitter = 1.0 + 0.03 * (((it * 7 + w * 13) % 11) - 5) / 5.0;
      const double slow = w < 5 ? 3.0 : 1.0;
      t << it << "," << w << "," << 0.1 * jitter * slow << "," << 0.02 * jitter * slow << "\n";
    }
  }
  const std::string trace = Write("bimodal.csv", t.str());
  Result r = Run("detect --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto events = Lines(r.out);
  ASSERT_EQ(events.size(), 5u) << r.out;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].at("worker"), static_cast<int>(i)) << events[i];
    EXPECT_EQ(events[i].at("state"), "straggler");
    EXPECT_EQ(events[i].at("kind"), "static");
    EXPECT_NEAR(events[i].at("slowdown").get<double>(), 3.0, 0.3);
  }
  for (const char* flags : {"--class-gap 1", "--static-slowdown 1.1"}) {
    Result bad = Run(std::string("detect ") + flags + " --trace " + trace);
    EXPECT_NE(bad.exit_code, 0) << flags;
    EXPECT_EQ(bad.out, "") << flags;
    const std::string flag = std::string(flags).substr(0, std::string(flags).find(' '));
    EXPECT_NE(bad.err.find(flag + ":"), std::string::npos) << bad.err;
  }
}

TEST_F(StarCli, DetectOnsetWindowFlagsTheStepSooner) {
  std::string trace = Write("t.csv", Trace(4, 200, 3, 50, 150, 3.0, 1.0));
  Result full = Run("detect --step-slowdown 0 --trace " + trace);
  Result fast = Run("detect --step-slowdown 0 --onset-window 4 --trace " + trace);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  auto f = Lines(full.out), s = Lines(fast.out);
  ASSERT_FALSE(f.empty());
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.front().at("worker"), 3);
  EXPECT_LT(s.front().at("iteration").get<int64_t>(), f.front().at("iteration").get<int64_t>());

  Result bad = Run("detect --onset-window -1 --trace " + trace);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(bad.out, "");
  EXPECT_NE(bad.err.find("--onset-window"), std::string::npos) << bad.err;
}

TEST_F(StarCli, DetectRejectsBadInputWithoutOutput) {
  std::string bad = Write("bad.csv", "iteration,worker,compute_seconds,communication_seconds\n0,0,x,1\n");
  Result r = Run("detect --trace " + bad);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("bad.csv:2: compute_seconds"), std::string::npos) << r.err;

  Result missing = Run("detect --trace " + (dir_ / "nope.csv").string());
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("nope.csv"), std::string::npos) << missing.err;

  std::string ok = Write("ok.csv", Trace(2, 10, -1, 0, 0, 1, 1));
  Result rule = Run("detect --rule fastest --trace " + ok);
  EXPECT_NE(rule.exit_code, 0);
  EXPECT_NE(rule.err.find("--rule"), std::string::npos) << rule.err;

  Result no_trace = Run("detect");
  EXPECT_EQ(no_trace.exit_code, 2);
  EXPECT_NE(no_trace.err.find("--trace"), std::string::npos) << no_trace.err;
}

TEST_F(StarCli, SelectStaysSynchronousWithoutStragglers) {
  std::string in = Write("in.json", R"({"architecture":"AllReduce","batch_per_worker":32,
      "noise_scale":500,"iteration_seconds":[0.1,0.1,0.1,0.1]})");
  Result r = Run("select --input " + in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json out = json::parse(r.out);
  EXPECT_EQ(out.at("mode"), "ssgd");
  EXPECT_EQ(out.at("k"), 4);
  EXPECT_TRUE(out.at("groups").is_array());
  EXPECT_GT(out.at("estimated_seconds_per_progress").get<double>(), 0);
}

TEST_F(StarCli, SelectLeavesSynchronousWhenOneWorkerIsFarSlower) {
  Result r = Run("select --input " + std::string(STAR_EXAMPLES_DIR) + "/select-input.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json out = json::parse(r.out);
  EXPECT_NE(out.at("mode"), "ssgd") << out;
  // The estimate is no worse than staying synchronous: 8 workers at t_max = 0.42 s.
  double phi = 900, b = 64;
  EXPECT_LE(out.at("estimated_seconds_per_progress").get<double>(), (1 + phi / (8 * b)) * 0.42);
}

TEST_F(StarCli, SelectReadsStdinAndRejectsBadFields) {
  std::string bad = Write("bad.json", R"({"architecture":"AllReduce","batch_per_worker":32,
      "noise_scale":500,"iteration_seconds":[0.1,-0.1]})");
  Result r = Run("select --input " + bad);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("iteration_seconds[1]"), std::string::npos) << r.err;

  std::string arch = Write("arch.json", R"({"architecture":"Ring","batch_per_worker":32,
      "noise_scale":500,"iteration_seconds":[0.1]})");
  Result a = Run("select --input " + arch);
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_NE(a.err.find("architecture"), std::string::npos) << a.err;

  std::string broken = Write("broken.json", "{\"architecture\": ");
  Result b = Run("select --input " + broken);
  EXPECT_EQ(b.exit_code, 1);
  EXPECT_NE(b.err.find("invalid JSON"), std::string::npos) << b.err;

  std::string good = Write("good.json", R"({"architecture":"ParameterServer","batch_per_worker":16,
      "noise_scale":100,"iteration_seconds":[0.2,0.2]})");
  Result s = Run("select --input - <" + good);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_TRUE(json::parse(s.out).contains("mode"));
}

TEST_F(StarCli, PlanBatchesSumsToTheGlobalBatchAndBalancesTime) {
  Result r = Run("plan-batches --input " + std::string(STAR_EXAMPLES_DIR) + "/plan-batches-input.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json out = json::parse(r.out);
  auto batches = out.at("batches").get<std::vector<int64_t>>();
  ASSERT_EQ(batches.size(), 4u);
  int64_t sum = 0;
  for (auto b : batches) {
    EXPECT_GE(b, 8);
    sum += b;
  }
  EXPECT_EQ(sum, 512);
  EXPECT_LT(batches[3], batches[0]);  // the slow worker gets less
  // makespan is the slowest worker's modelled time
  const double alpha[] = {0.0020, 0.0020, 0.0021, 0.0045}, beta[] = {0.030, 0.030, 0.028, 0.035};
  double worst = 0;
  for (int i = 0; i < 4; ++i) worst = std::max(worst, alpha[i] * batches[i] + beta[i]);
  EXPECT_NEAR(out.at("makespan_seconds").get<double>(), worst, 1e-9);
}

TEST_F(StarCli, PlanBatchesRejectsInfeasibleInput) {
  std::string in = Write("in.json", R"({"global_batch":10,"min_batch":8,
      "workers":[{"alpha":0.001,"beta":0.01},{"alpha":0.001,"beta":0.01}]})");
  Result r = Run("plan-batches --input " + in);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("global_batch"), std::string::npos) << r.err;

  std::string neg = Write("neg.json", R"({"global_batch":100,"min_batch":1,
      "workers":[{"alpha":-1,"beta":0.01}]})");
  Result n = Run("plan-batches --input " + neg);
  EXPECT_EQ(n.exit_code, 1);
  EXPECT_NE(n.err.find("workers[0].alpha"), std::string::npos) << n.err;
}

}  // namespace
