// `star local` end to end: the real binary runs a TrainingJob manifest with real worker
// processes (the bundled Fashion-MNIST trainer) in cgroups and network namespaces, as
// root. Checks what the run reports and that it leaves nothing behind.
//
// Runs need root (cgroups, namespaces) and the trainer (LibTorch); without them the tests
// skip with the reason.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "star-local-test-XXXXXX").string();
    if (::mkdtemp(t.data()) != nullptr) path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A child process with stdout and stderr in files; killed and reaped by the destructor.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::string& out, const std::string& err) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // Waits for the exit (bounded); the wait status, or -1 at the deadline.
  int Wait(std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (pid_ > 0) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

std::string Manifest(const std::string& name, int workers, int64_t max_iterations,
                     double target) {
  std::ostringstream m;
  m << "apiVersion: star.dev/v1alpha1\n"
       "kind: TrainingJob\n"
       "metadata:\n  name: " << name << "\n"
       "spec:\n"
       "  workers:\n"
       "    replicas: " << workers << "\n"
       "    template:\n"
       "      spec:\n"
       "        containers:\n"
       "          - name: trainer\n"
       "            resources: {limits: {cpu: 400m}}\n"
       "  training:\n"
       "    globalBatchSize: " << 64 * workers << "\n"
       "    targetAccuracy: " << target << "\n"
       "    maxIterations: " << max_iterations << "\n";
  return m.str();
}

// What a run left behind: cgroups and namespaces named after the job, and processes
// whose environment carries STAR_JOB=<job>.
std::vector<std::string> Leftovers(const std::string& job) {
  std::vector<std::string> left;
  std::error_code ec;
  for (const char* root : {"/sys/fs/cgroup/cpu/star-local", "/sys/fs/cgroup/cpuacct/star-local"}) {
    for (const auto& e : fs::directory_iterator(root, ec)) {
      if (e.path().filename().string().rfind(job + "-", 0) == 0) left.push_back(e.path().string());
    }
  }
  for (const auto& e : fs::directory_iterator("/var/run/netns", ec)) {
    if (e.path().filename().string().find(job) != std::string::npos) {
      left.push_back("netns " + e.path().filename().string());
    }
  }
  const std::string marker = "STAR_JOB=" + job;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string env = ReadAll((e.path() / "environ").string());
    for (size_t p = 0; (p = env.find(marker, p)) != std::string::npos; p += marker.size()) {
      const size_t end = p + marker.size();
      if ((p == 0 || env[p - 1] == '\0') && (end == env.size() || env[end] == '\0')) {
        left.push_back("process " + e.path().filename().string());
        break;
      }
    }
  }
  return left;
}

class LocalRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "star local needs root (cgroups, namespaces)";
    if (::access(STAR_FMNIST_BINARY, X_OK) != 0) GTEST_SKIP() << "no trainer binary";
    ASSERT_FALSE(dir_.path().empty());
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string p = dir_.path() + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  // Runs `star local` to the end; returns the exit code (-1 = did not end in time).
  int RunStar(const std::vector<std::string>& args, std::string* out, std::string* err,
              std::chrono::seconds limit = std::chrono::seconds(300)) {
    std::vector<std::string> argv = {STAR_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string o = dir_.path() + "/stdout", e = dir_.path() + "/stderr";
    Child child(argv, o, e);
    if (child.pid() <= 0) return -1;
    const int status = child.Wait(limit);
    *out = ReadAll(o);
    *err = ReadAll(e);
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  TempDir dir_;
};

bool HasEvent(const json& report, const std::string& event, int worker) {
  for (const auto& e : report["timeline"]) {
    if (e["event"] == event && e["worker"] == worker) return true;
  }
  return false;
}

TEST_F(LocalRunTest, CleanRunFlagsNobodyAndDecidesNothing) {
  const std::string job = "clean-run";
  // The window rule flags only a worker twice as slow as the fastest: on a 2-core machine
  // a clean run's windowed times have reached 1.2x the typical worker's (the default MAD
  // rule's min_slowdown), the machine's noise, not a straggler. The step path (1.6x in
  // two consecutive samples, under any rule) is still judged, and a loop that decides
  // without a straggler still fails this test.
  const std::string manifest = Write("job.yaml", Manifest(job, 3, 120, 0.99) +
                                                     "  mitigation:\n"
                                                     "    detection: {rule: STAR, threshold: 1.0}\n");
  const std::string report_path = dir_.path() + "/report.json";
  std::string out, err;
  ASSERT_EQ(RunStar({"local", manifest, "--report", report_path, "--quiet"}, &out, &err), 0)
      << err;
  const json report = json::parse(ReadAll(report_path));
  EXPECT_EQ(report["outcome"], "max_iterations");
  EXPECT_EQ(report["policy"], "auto");
  EXPECT_EQ(report["workers"], 3);
  EXPECT_EQ(report["iterations"], 120);
  EXPECT_TRUE(report["tta_seconds"].is_null());  // 0.99 is out of reach in 120 iterations
  EXPECT_TRUE(report["final_accuracy"].is_number());
  EXPECT_FALSE(report["accuracy_curve"].empty());
  EXPECT_EQ(report["decisions"], 0) << report["timeline"].dump();
  EXPECT_TRUE(report["stragglers"].empty()) << report["timeline"].dump();
  for (const auto& e : report["timeline"]) EXPECT_NE(e["event"], "straggler") << e.dump();
  // The summary on stdout is the report without its samples.
  const json summary = json::parse(out);
  EXPECT_EQ(summary["outcome"], "max_iterations");
  EXPECT_FALSE(summary.contains("samples"));
  EXPECT_TRUE(Leftovers(job).empty()) << ::testing::PrintToString(Leftovers(job));
}

TEST_F(LocalRunTest, InjectedNeighborIsDetectedOnItsWorkerAndMitigated) {
  const std::string job = "neighbor-run";
  const std::string manifest = Write("job.yaml", Manifest(job, 3, 240, 0.99));
  const std::string report_path = dir_.path() + "/report.json";
  const std::string plot_path = dir_.path() + "/run.png";
  std::string out, err;
  ASSERT_EQ(RunStar({"local", manifest, "--inject", "worker=1,neighbor=3,start=3s", "--report",
                     report_path, "--plot", plot_path, "--quiet"},
                    &out, &err),
            0)
      << err;
  const json report = json::parse(ReadAll(report_path));
  EXPECT_TRUE(HasEvent(report, "inject", 1)) << report["timeline"].dump();
  EXPECT_TRUE(HasEvent(report, "straggler", 1)) << report["timeline"].dump();
  // The first straggler the run sees is the worker beside the neighbor (a loaded machine
  // may flag another worker briefly later; the clean run checks nobody is flagged
  // without an injection).
  for (const auto& e : report["timeline"]) {
    if (e["event"] == "straggler") {
      EXPECT_EQ(e["worker"], 1) << e.dump();
      break;
    }
  }
  // A mitigation: AMP for the straggler, a mode change or CPU taken from the neighbor.
  const bool mitigated = HasEvent(report, "amp_on", 1) || HasEvent(report, "reallocate", 1) ||
                         HasEvent(report, "mode", -1);
  EXPECT_TRUE(mitigated) << report["timeline"].dump();
  EXPECT_GE(report["decisions"].get<int>(), 1);
  // The plot is a PNG.
  const std::string png = ReadAll(plot_path);
  ASSERT_GE(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  EXPECT_TRUE(Leftovers(job).empty()) << ::testing::PrintToString(Leftovers(job));
}

TEST_F(LocalRunTest, CtrlCStopsEverythingAndRemovesItsCgroupsAndNamespaces) {
  const std::string job = "ctrlc-run";
  const std::string manifest = Write("job.yaml", Manifest(job, 2, 100000, 0.99));
  const std::string out = dir_.path() + "/stdout", err = dir_.path() + "/stderr";
  Child child({STAR_BINARY, "local", manifest, "--inject", "worker=0,neighbor=1"}, out, err);
  ASSERT_GT(child.pid(), 0);
  // Training: a progress line shows an iteration past 0 (bounded wait on the condition).
  auto training = [&] {
    const std::string text = ReadAll(err);
    for (size_t p = text.find("iteration "); p != std::string::npos;
         p = text.find("iteration ", p + 1)) {
      if (std::atoll(text.c_str() + p + 10) > 0) return true;
    }
    return false;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!training() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(training()) << ReadAll(err);
  EXPECT_FALSE(Leftovers(job).empty());  // the run's cgroups and processes exist
  ASSERT_EQ(::kill(child.pid(), SIGINT), 0);
  const int status = child.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(status >= 0 && WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 130) << ReadAll(err);
  EXPECT_NE(ReadAll(err).find("interrupted"), std::string::npos);
  EXPECT_EQ(json::parse(ReadAll(out))["outcome"], "interrupted");
  EXPECT_TRUE(Leftovers(job).empty()) << ::testing::PrintToString(Leftovers(job));
}

// A pipeline job with the bundled trainer: each worker runs its stage of the MLP
// (rank = stage, one replica), the stages meet over their own links, and the run ends at
// its iteration budget with every stage's result line and no evaluator.
TEST_F(LocalRunTest, APipelineJobRunsItsStagesWithTheBundledTrainer) {
  const std::string job = "pipeline-run";
  std::string manifest = Manifest(job, 2, 20, 0.99) +
                         "  parallelism: {pipelineStages: 2, microBatches: 4}\n";
  const std::string resources = "            resources: {limits: {cpu: 400m}}\n";
  manifest.insert(manifest.find(resources) + resources.size(),
                  "            env: [{name: STAR_FMNIST_HIDDEN, value: \"64\"}]\n");
  const std::string path = Write("job.yaml", manifest), logs = dir_.path() + "/logs";
  const std::string report_path = dir_.path() + "/report.json";
  std::string out, err;
  ASSERT_EQ(RunStar({"local", path, "--report", report_path, "--log-dir", logs, "--quiet"}, &out, &err), 0)
      << err;
  const json report = json::parse(ReadAll(report_path));
  EXPECT_EQ(report["outcome"], "max_iterations");
  EXPECT_EQ(report["iterations"], 20);
  EXPECT_EQ(report["decisions"], 0) << "clean links keep a pipeline's static schedule";
  EXPECT_FALSE(fs::exists(logs + "/evaluator.log"));
  for (int stage = 0; stage < 2; ++stage) {
    const std::string log = ReadAll(logs + "/worker-" + std::to_string(stage) + ".log");
    ASSERT_FALSE(log.empty());
    const size_t from = log.rfind('\n', log.size() - 2);  // the result line, the last one
    const json line = json::parse(log.substr(from == std::string::npos ? 0 : from + 1));
    EXPECT_EQ(line["stage"], stage);
    EXPECT_EQ(line["iterations"], 20);
    EXPECT_EQ(line["warmup"], json::array({2, 1})) << "plain 1F1B";
    ASSERT_EQ(line["links"].size(), 1u);
    EXPECT_EQ(line["links"][0]["peer"], 1 - stage);
    if (stage == 1) {
      EXPECT_GT(line["last_loss"].get<double>(), 0);
    }
  }
  EXPECT_TRUE(Leftovers(job).empty()) << ::testing::PrintToString(Leftovers(job));
}

struct BadInput {
  std::string name;
  std::string manifest;             // "" = a valid one
  std::vector<std::string> extra;   // more arguments
  std::string message;              // expected in stderr
};

class LocalBadInputTest : public LocalRunTest,
                          public ::testing::WithParamInterface<BadInput> {};

TEST_P(LocalBadInputTest, IsRefusedNamingTheFieldAndChangesNothing) {
  const BadInput& c = GetParam();
  const std::string job = "bad-input";
  const std::string manifest =
      Write("job.yaml", c.manifest.empty() ? Manifest(job, 2, 10, 0.9) : c.manifest);
  std::vector<std::string> args = {"local", manifest};
  args.insert(args.end(), c.extra.begin(), c.extra.end());
  std::string out, err;
  EXPECT_EQ(RunStar(args, &out, &err, std::chrono::seconds(60)), 1) << err;
  EXPECT_NE(err.find(c.message), std::string::npos) << err;
  EXPECT_EQ(out, "");
  EXPECT_TRUE(Leftovers(job).empty());
}

const std::string kValidHead =
    "apiVersion: star.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: bad-input}\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, LocalBadInputTest,
    ::testing::Values(
        BadInput{"ZeroReplicas",
                 kValidHead + "spec:\n  workers: {replicas: 0}\n  training: {globalBatchSize: 64, "
                              "targetAccuracy: 0.9}\n",
                 {}, "spec.workers.replicas"},
        BadInput{"TargetAboveOne",
                 kValidHead + "spec:\n  workers: {replicas: 2}\n  training: {globalBatchSize: 64, "
                              "targetAccuracy: 1.5}\n",
                 {}, "spec.training.targetAccuracy"},
        BadInput{"UnknownPolicy",
                 kValidHead + "spec:\n  workers: {replicas: 2}\n  training: {globalBatchSize: 64, "
                              "targetAccuracy: 0.9}\n  synchronization: {policy: Sometimes}\n",
                 {}, "spec.synchronization.policy"},
        BadInput{"NotYaml", "spec: [unclosed\n", {}, "job.yaml"},
        BadInput{"InjectWorkerOutOfRange", "", {"--inject", "worker=5,cpu=0.5"}, "worker"},
        BadInput{"InjectCpuAboveOne", "", {"--inject", "worker=1,cpu=2"}, "cpu"},
        BadInput{"InjectNoKind", "", {"--inject", "worker=1"}, "worker=1"},
        BadInput{"InjectBadDuration", "", {"--inject", "worker=1,cpu=0.5,start=10"}, "start"},
        BadInput{"InjectOverlap", "",
                 {"--inject", "worker=1,cpu=0.5", "--inject", "worker=1,cpu=0.2,start=5s"},
                 "overlap"},
        BadInput{"Policy", "", {"--policy", "fastest"}, "--policy"}),
    [](const auto& info) { return info.param.name; });

TEST_F(LocalRunTest, MissingManifestIsAClearError) {
  std::string out, err;
  EXPECT_EQ(RunStar({"local", dir_.path() + "/nope.yaml"}, &out, &err, std::chrono::seconds(60)),
            1);
  EXPECT_NE(err.find("nope.yaml"), std::string::npos) << err;
}

}  // namespace
