// The sync engine over real Gloo, one OS process per worker, all on 127.0.0.1.
//
// The parent hosts the rendezvous StoreServer and re-executes this binary once per worker
// (ProcessGroup: fork + exec with --gtest_filter=ShimWorker.Main). Every process builds
// the same least-squares problem from a fixed seed; worker r trains on its slice of each
// global batch, writes its final parameters and its outcome to the test's temp dir, and
// exits with a code saying what happened. The parent compares against a single-worker
// reference computed in-process without communication.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "process_harness.h"
#include "star/shim/gloo_collective.h"
#include "star/shim/local_collective.h"
#include "star/shim/store_server.h"
#include "star/shim/sync_engine.h"

namespace star::shim {
namespace {

using harness::Env;
using std::chrono::milliseconds;

// Worker exit codes.
constexpr int kExitOk = 0;
constexpr int kExitSetupError = 2;   // store, Gloo or engine creation failed
constexpr int kExitEngineError = 3;  // Schedule or Step returned a non-OK Status
constexpr int kExitNotKilled = 4;    // the kill test's victim was never killed
constexpr int kExitTestError = 5;    // the worker's own bookkeeping went wrong

// ---- the problem every process builds --------------------------------------------------

constexpr size_t kDim = 8;
constexpr int64_t kSamples = 96;
constexpr uint32_t kSeed = 20240611;
const SgdOptions kSgd{/*lr=*/0.05f, /*momentum=*/0.5f, /*weight_decay=*/0.0f};

// Least squares: loss_i(w) = 0.5 (a_i . w - y_i)^2 with y = a w_true + noise.
struct Problem {
  std::vector<double> a;  // kSamples x kDim, row-major
  std::vector<double> y;  // kSamples
  std::vector<float> init;
};

const Problem& TheProblem() {
  static const Problem p = [] {
    Problem q;
    std::mt19937 gen(kSeed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> w_true(kDim);
    for (double& w : w_true) w = u(gen);
    q.a.resize(static_cast<size_t>(kSamples) * kDim);
    for (double& x : q.a) x = u(gen);
    q.y.resize(static_cast<size_t>(kSamples));
    for (size_t i = 0; i < q.y.size(); ++i) {
      double dot = 0;
      for (size_t j = 0; j < kDim; ++j) dot += q.a[i * kDim + j] * w_true[j];
      q.y[i] = dot + 0.1 * u(gen);
    }
    for (size_t j = 0; j < kDim; ++j) q.init.push_back(static_cast<float>(u(gen)));
    return q;
  }();
  return p;
}

// The gradient SUMMED over samples begin, begin+1, ..., begin+count-1 (mod kSamples).
std::vector<float> GradSum(std::span<const float> w, int64_t begin, int64_t count) {
  const Problem& p = TheProblem();
  std::vector<double> g(kDim, 0.0);
  for (int64_t s = begin; s < begin + count; ++s) {
    const size_t i = static_cast<size_t>(s % kSamples);
    double r = -p.y[i];
    for (size_t j = 0; j < kDim; ++j) r += p.a[i * kDim + j] * w[j];
    for (size_t j = 0; j < kDim; ++j) g[j] += r * p.a[i * kDim + j];
  }
  return std::vector<float>(g.begin(), g.end());
}

double Loss(std::span<const float> w) {
  const Problem& p = TheProblem();
  double sum = 0;
  for (size_t i = 0; i < p.y.size(); ++i) {
    double r = -p.y[i];
    for (size_t j = 0; j < kDim; ++j) r += p.a[i * kDim + j] * w[j];
    sum += 0.5 * r * r;
  }
  return sum / static_cast<double>(p.y.size());
}

api::Decision MakeDecision(int64_t epoch, int64_t at, api::SyncMode mode, int k,
                           std::vector<std::vector<int>> groups) {
  api::Decision d;
  d.epoch = epoch;
  d.apply_at_iteration = at;
  d.mode = mode;
  d.k = k;
  d.groups = std::move(groups);
  return d;
}

// ssgd -> fixed_k (ring of the n/2 highest ranks, rank 0 a child) -> groups (evens,
// odds) -> ssgd, the same on every worker.
constexpr int kSwitchSteps = 16;
std::vector<api::Decision> SwitchPlan(int n) {
  std::vector<int> slowest_last(static_cast<size_t>(n));
  std::iota(slowest_last.rbegin(), slowest_last.rend(), 0);  // n-1, ..., 0
  std::vector<int> evens, odds;
  for (int r = 0; r < n; ++r) (r % 2 == 0 ? evens : odds).push_back(r);
  return {MakeDecision(1, 3, api::SyncMode::kFixedK, std::max(1, n / 2), {slowest_last}),
          MakeDecision(2, 8, api::SyncMode::kGroups, 1, {evens, odds}),
          MakeDecision(3, 12, api::SyncMode::kSsgd, n, {})};
}

// ---- worker side -----------------------------------------------------------------------

std::vector<int64_t> ParseBatches(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::atoll(item.c_str()));
  return out;
}

// Runs one worker as configured by the STAR_E2E_* variables; returns its exit code. The
// outcome ("OK" or the failing Status) goes to <dir>/status<rank>, parameters to
// <dir>/params<rank> (raw float32) on success.
int RunWorker() {
  const int rank = std::atoi(Env("STAR_E2E_RANK").c_str());
  const std::vector<int64_t> batches = ParseBatches(Env("STAR_E2E_BATCHES"));
  const int size = static_cast<int>(batches.size());
  const int steps = std::atoi(Env("STAR_E2E_STEPS").c_str());
  const milliseconds timeout(std::atoi(Env("STAR_E2E_TIMEOUT_MS").c_str()));
  const bool switches = Env("STAR_E2E_SWITCHES") == "1";
  const int signal_at = Env("STAR_E2E_SIGNAL_AT").empty() ? -1 : std::atoi(Env("STAR_E2E_SIGNAL_AT").c_str());
  const int victim = Env("STAR_E2E_VICTIM").empty() ? -1 : std::atoi(Env("STAR_E2E_VICTIM").c_str());
  const std::string prefix = Env("STAR_E2E_DIR") + "/";
  auto finish = [&](int code, const std::string& outcome) {
    std::ofstream(prefix + "status" + std::to_string(rank)) << outcome;
    std::cerr << "rank " << rank << ": " << outcome << "\n";
    return code;
  };
  if (rank < 0 || rank >= size) return finish(kExitTestError, "bad STAR_E2E_RANK/BATCHES");

  auto store = ConnectStore(Env("STAR_E2E_URL"), StoreOptions{timeout});
  if (!store.ok()) return finish(kExitSetupError, store.status().ToString());
  GlooOptions gloo;
  gloo.prefix = "e2e";
  gloo.timeout = timeout;
  auto world = ConnectGloo(*store, rank, size, gloo);
  if (!world.ok()) return finish(kExitSetupError, world.status().ToString());
  auto engine = SyncEngine::Create(std::move(*world), TheProblem().init, kSgd,
                                   EngineOptions{timeout});
  if (!engine.ok()) return finish(kExitSetupError, engine.status().ToString());
  SyncEngine& e = **engine;
  if (switches) {
    for (const api::Decision& d : SwitchPlan(size)) {
      Status s = e.Schedule(d);
      if (!s.ok()) return finish(kExitEngineError, s.ToString());
    }
  }

  const int64_t global = std::accumulate(batches.begin(), batches.end(), int64_t{0});
  const int64_t offset =
      std::accumulate(batches.begin(), batches.begin() + rank, int64_t{0});
  const int64_t batch = batches[static_cast<size_t>(rank)];
  bool signalled = false;
  // A fixed_k child may advance several iterations per Step, never fewer than one.
  for (int calls = 0; e.iteration() < steps && calls < steps; ++calls) {
    const std::vector<float> grad = GradSum(e.params(), e.iteration() * global + offset, batch);
    StatusOr<StepStats> stats = e.Step(grad, batch);
    if (!stats.ok()) return finish(kExitEngineError, stats.status().ToString());
    if (signal_at >= 0 && !signalled && e.iteration() >= signal_at) {
      signalled = true;
      Status s = harness::SignalParent();
      if (!s.ok()) return finish(kExitTestError, s.ToString());
      if (rank == victim) {
        // Waits to be SIGKILLed; bounded in case the parent never does it.
        (void)::poll(nullptr, 0, 30000);
        return finish(kExitNotKilled, "victim was not killed");
      }
    }
  }
  if (e.iteration() != steps) {
    return finish(kExitTestError, "ended at iteration " + std::to_string(e.iteration()) +
                                      ", want " + std::to_string(steps));
  }
  std::ofstream out(prefix + "params" + std::to_string(rank), std::ios::binary);
  out.write(reinterpret_cast<const char*>(e.params().data()),
            static_cast<std::streamsize>(e.params().size_bytes()));
  out.close();
  if (!out) return finish(kExitTestError, "cannot write params");
  return finish(kExitOk, "OK");
}

TEST(ShimWorker, Main) {
  if (Env("STAR_E2E_RANK").empty()) GTEST_SKIP() << "worker entry point, started by the tests below";
  std::_Exit(RunWorker());  // no gtest teardown in a worker: its outcome is its exit code
}

// ---- parent side -----------------------------------------------------------------------

// The parameters after `steps` SGD steps of one worker with the whole global batch: the
// engine over a single in-process rank (no communication, the same update code).
std::vector<float> Reference(int64_t global_batch, int steps) {
  auto engine = SyncEngine::Create(std::move(NewLocalGroup(1, milliseconds(10000))[0]),
                                   TheProblem().init, kSgd);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  SyncEngine& e = **engine;
  for (int t = 0; t < steps; ++t) {
    auto stats = e.Step(GradSum(e.params(), t * global_batch, global_batch), global_batch);
    EXPECT_TRUE(stats.ok()) << stats.status();
  }
  return std::vector<float>(e.params().begin(), e.params().end());
}

class SyncEngineProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty()) << "cannot create a temp dir";
    auto server = StoreServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // Starts one worker per entry of `batches`.
  void Spawn(const std::vector<int64_t>& batches, int steps, milliseconds timeout,
             const std::vector<std::string>& extra = {}) {
    std::string list;
    for (int64_t b : batches) list += (list.empty() ? "" : ",") + std::to_string(b);
    for (size_t r = 0; r < batches.size(); ++r) {
      std::vector<std::string> env = {
          "STAR_E2E_RANK=" + std::to_string(r), "STAR_E2E_BATCHES=" + list,
          "STAR_E2E_STEPS=" + std::to_string(steps),
          "STAR_E2E_TIMEOUT_MS=" + std::to_string(timeout.count()),
          "STAR_E2E_URL=" + server_->url(), "STAR_E2E_DIR=" + dir_.path()};
      env.insert(env.end(), extra.begin(), extra.end());
      auto index = group_.Spawn("ShimWorker.Main", env, Path("log", static_cast<int>(r)));
      ASSERT_TRUE(index.ok()) << index.status();
    }
  }

  std::string Path(const std::string& what, int rank) const {
    return dir_.path() + "/" + what + std::to_string(rank);
  }

  // What a worker did, for failure messages.
  std::string Explain(int rank, int wait_status) const {
    return "rank " + std::to_string(rank) + " " + harness::DescribeWaitStatus(wait_status) +
           "; outcome: " + harness::ReadFile(Path("status", rank)) +
           "\n--- log ---\n" + harness::ReadFile(Path("log", rank));
  }

  // Reaps every worker (generous deadline) and expects each to have succeeded.
  void ExpectAllSucceed() {
    const std::vector<int> statuses = group_.ReapAll(kReapLimit);
    for (size_t r = 0; r < statuses.size(); ++r) {
      const int st = statuses[r];
      EXPECT_TRUE(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == kExitOk)
          << Explain(static_cast<int>(r), st);
    }
  }

  std::vector<float> Params(int rank) const {
    const std::string bytes = harness::ReadFile(Path("params", rank));
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
  }

  // Every worker's parameters equal the reference within 1e-5 relative to the reference's
  // scale (its largest magnitude, at least 1).
  void ExpectParamsMatch(const std::vector<float>& ref, int workers) {
    ASSERT_EQ(ref.size(), kDim);
    float scale = 1.0f;
    for (float x : ref) scale = std::max(scale, std::abs(x));
    for (int r = 0; r < workers; ++r) {
      const std::vector<float> got = Params(r);
      ASSERT_EQ(got.size(), ref.size()) << "rank " << r;
      for (size_t i = 0; i < ref.size(); ++i) {
        EXPECT_NEAR(got[i], ref[i], 1e-5f * scale) << "rank " << r << " param " << i;
      }
    }
  }

  static constexpr milliseconds kReapLimit{30000};
  static constexpr milliseconds kTimeout{10000};
  // Destroyed in reverse: workers are killed and reaped first, then the server stops,
  // then the directory goes.
  harness::TempDir dir_{"star-e2e-engine"};
  std::unique_ptr<StoreServer> server_;
  harness::ProcessGroup group_;
};

constexpr int kSteps = 10;

class SsgdWorldSizeTest : public SyncEngineProcessTest,
                          public ::testing::WithParamInterface<int> {};

TEST_P(SsgdWorldSizeTest, NWorkersOfBatchBMatchOneWorkerOfBatchNB) {
  const int n = GetParam();
  constexpr int64_t kBatch = 4;
  Spawn(std::vector<int64_t>(static_cast<size_t>(n), kBatch), kSteps, kTimeout);
  const std::vector<float> ref = Reference(n * kBatch, kSteps);
  ASSERT_LT(Loss(ref), Loss(TheProblem().init)) << "the reference did not train";
  ExpectAllSucceed();
  ExpectParamsMatch(ref, n);
}

INSTANTIATE_TEST_SUITE_P(Workers, SsgdWorldSizeTest, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST_F(SyncEngineProcessTest, UnequalBatchesGiveExactlyTheGlobalBatchUpdate) {
  const std::vector<int64_t> batches = {3, 5, 8};
  Spawn(batches, kSteps, kTimeout);
  const std::vector<float> ref = Reference(16, kSteps);
  ExpectAllSucceed();
  ExpectParamsMatch(ref, 3);
}

class ModeSwitchTest : public SyncEngineProcessTest, public ::testing::WithParamInterface<int> {};

TEST_P(ModeSwitchTest, SsgdFixedKGroupsSsgdEndsWithIdenticalParametersOnEveryWorker) {
  const int n = GetParam();
  Spawn(std::vector<int64_t>(static_cast<size_t>(n), 4), kSwitchSteps, kTimeout,
        {"STAR_E2E_SWITCHES=1"});
  ExpectAllSucceed();
  const std::vector<float> first = Params(0);
  ASSERT_EQ(first.size(), kDim);
  for (float x : first) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LT(Loss(first), Loss(TheProblem().init)) << "training through the switches did not train";
  for (int r = 1; r < n; ++r) EXPECT_EQ(Params(r), first) << "rank " << r << " differs from rank 0";
}

INSTANTIATE_TEST_SUITE_P(Workers, ModeSwitchTest, ::testing::Values(3, 4),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST_F(SyncEngineProcessTest, KilledWorkerMakesEveryOtherWorkerFailWithAClearStatus) {
  constexpr int kWorkers = 3, kVictim = 2, kSignalAt = 4;
  Spawn(std::vector<int64_t>(kWorkers, 4), /*steps=*/1000, milliseconds(3000),
        {"STAR_E2E_SIGNAL_AT=" + std::to_string(kSignalAt),
         "STAR_E2E_VICTIM=" + std::to_string(kVictim)});
  // Every worker has finished iteration kSignalAt; the victim now idles, the others are
  // in the next all-reduce.
  Status ready = group_.WaitForSignals(kWorkers, kReapLimit);
  ASSERT_TRUE(ready.ok()) << ready << "\n" << Explain(0, -1) << "\n" << Explain(kVictim, -1);
  ASSERT_TRUE(group_.Kill(kVictim).ok());
  const std::vector<int> statuses = group_.ReapAll(kReapLimit);

  const int victim = statuses[kVictim];
  EXPECT_TRUE(victim != -1 && WIFSIGNALED(victim) && WTERMSIG(victim) == SIGKILL)
      << Explain(kVictim, victim);
  for (int r = 0; r < kWorkers; ++r) {
    if (r == kVictim) continue;
    const int st = statuses[static_cast<size_t>(r)];
    const std::string outcome = harness::ReadFile(Path("status", r));
    std::cout << "rank " << r << " " << harness::DescribeWaitStatus(st) << ": " << outcome << "\n";
    EXPECT_TRUE(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == kExitEngineError)
        << Explain(r, st);
    EXPECT_TRUE(outcome.rfind("UNAVAILABLE", 0) == 0 || outcome.rfind("DEADLINE_EXCEEDED", 0) == 0)
        << outcome;
    // The peer dies in the arrival barrier or in the all-reduce after it.
    EXPECT_TRUE(outcome.find("ssgd all-reduce") != std::string::npos ||
                outcome.find("ssgd arrival barrier") != std::string::npos)
        << outcome;
  }
}

}  // namespace
}  // namespace star::shim
