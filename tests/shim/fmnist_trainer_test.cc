// star-fmnist end to end: two worker processes over Gloo on 127.0.0.1, reporting to a
// controller (ReportServer in this test) whose Decision changes worker 1's AMP and local
// batch mid-run. Checks the report -> decision -> apply loop and batch re-balancing in the
// real trainer.
#include <sys/wait.h>

#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_harness.h"
#include "star/report/server.h"
#include "star/shim/store_server.h"

namespace star::shim {
namespace {

using harness::ProcessGroup;
using harness::TempDir;
using report::ReportServer;
using report::ReportServerOptions;

// The last line of a worker's log that parses as a JSON object.
nlohmann::json LastJsonLine(const std::string& log) {
  std::istringstream in(log);
  std::string line;
  nlohmann::json last;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) last = j;
  }
  return last;
}

TEST(FmnistTrainer, TwoWorkersApplyTheControllersDecisionAndStayInSync) {
  constexpr int64_t kApplyAt = 20;
  std::mutex mu;
  std::vector<api::WorkerReport> reports;
  api::Decision decision;
  decision.epoch = 1;
  decision.apply_at_iteration = kApplyAt;
  decision.mode = api::SyncMode::kSsgd;
  decision.k = 2;
  decision.workers = {{0, false, 64}, {1, true, 32}};
  auto server = ReportServer::Start(
      ReportServerOptions{"127.0.0.1", 0, "secret", {}},
      [&](const api::WorkerReport& r) -> std::optional<api::Decision> {
        std::lock_guard<std::mutex> lock(mu);
        reports.push_back(r);
        return decision;  // the same decision to everyone; re-delivery is a no-op
      });
  ASSERT_TRUE(server.ok()) << server.status();

  TempDir dir("star-fmnist-e2e");
  ASSERT_FALSE(dir.path().empty());
  // The store is hosted here, as the controller hosts it in a cluster.
  auto store_server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(store_server.ok()) << store_server.status();

  ProcessGroup group;
  const std::string store = (*store_server)->url();
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> args = {
        "--rank", std::to_string(rank), "--world", "2", "--store", store,
        "--job", "e2e", "--controller", (*server)->base_url(), "--token", "secret",
        "--report-every", "5", "--max-iterations", "40", "--batch", "64", "--amp", "off",
        "--threads", "1", "--log-every", "0", "--timeout-ms", "60000"};
    auto spawned = group.SpawnProgram(STAR_FMNIST_BINARY, args, {},
                                      dir.path() + "/worker" + std::to_string(rank) + ".log");
    ASSERT_TRUE(spawned.ok()) << spawned.status();
  }
  const std::vector<int> statuses = group.ReapAll(std::chrono::minutes(4));
  std::vector<nlohmann::json> finals;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = harness::ReadFile(dir.path() + "/worker" + std::to_string(rank) + ".log");
    ASSERT_TRUE(WIFEXITED(statuses[rank]) && WEXITSTATUS(statuses[rank]) == 0)
        << "worker " << rank << " " << harness::DescribeWaitStatus(statuses[rank]) << "\n" << log;
    finals.push_back(LastJsonLine(log));
    ASSERT_TRUE(finals.back().contains("final_accuracy")) << log;
    EXPECT_EQ(finals.back().at("iterations"), 40);
  }
  // SSGD throughout: both workers hold the same parameters, so the same accuracy.
  EXPECT_EQ(finals[0].at("final_accuracy"), finals[1].at("final_accuracy"));

  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(reports.size(), 16u);  // 40 iterations / 5 per report x 2 workers
  int after = 0;
  for (const auto& r : reports) {
    EXPECT_EQ(r.job, "e2e");
    EXPECT_EQ(r.iterations, 5);
    EXPECT_GT(r.compute_seconds, 0);
    const bool applied = r.iteration - r.iterations >= kApplyAt;  // whole report after the switch
    if (!applied) {
      EXPECT_EQ(r.local_batch, 64) << "worker " << r.worker << " iteration " << r.iteration;
      EXPECT_FALSE(r.amp);
      continue;
    }
    ++after;
    EXPECT_EQ(r.local_batch, r.worker == 1 ? 32 : 64) << "worker " << r.worker;
    EXPECT_EQ(r.amp, r.worker == 1) << "worker " << r.worker;
  }
  EXPECT_EQ(after, 8);
}

// A parameter-server job: one server, two workers; the controller switches it from SSGD to
// ASGD at iteration 10. Every gradient reaches the server exactly once, and after the
// switch each gradient is its own update.
TEST(FmnistTrainer, ParameterServerJobSwitchesToAsgdAndAppliesEveryGradientOnce) {
  constexpr int kIterations = 30, kSwitchAt = 10;
  api::Decision asgd;
  asgd.epoch = 1;
  asgd.apply_at_iteration = kSwitchAt;
  asgd.mode = api::SyncMode::kAsgd;
  asgd.k = 1;
  auto server = ReportServer::Start(ReportServerOptions{"127.0.0.1", 0, "", {}},
                                    [&](const api::WorkerReport&) -> std::optional<api::Decision> {
                                      return asgd;
                                    });
  ASSERT_TRUE(server.ok()) << server.status();
  auto store_server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(store_server.ok()) << store_server.status();
  TempDir dir("star-fmnist-ps");
  ASSERT_FALSE(dir.path().empty());

  ProcessGroup group;
  for (int rank = 0; rank < 3; ++rank) {  // rank 0 serves, ranks 1 and 2 train
    std::vector<std::string> args = {
        "--rank", std::to_string(rank), "--servers", "1", "--world", "2",
        "--store", (*store_server)->url(), "--job", "ps", "--controller", (*server)->base_url(),
        "--report-every", "5", "--max-iterations", std::to_string(kIterations),
        "--amp", "off", "--threads", "1", "--log-every", "0", "--timeout-ms", "60000"};
    auto spawned = group.SpawnProgram(STAR_FMNIST_BINARY, args, {},
                                      dir.path() + "/rank" + std::to_string(rank) + ".log");
    ASSERT_TRUE(spawned.ok()) << spawned.status();
  }
  const std::vector<int> statuses = group.ReapAll(std::chrono::minutes(4));
  std::vector<nlohmann::json> finals;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string log = harness::ReadFile(dir.path() + "/rank" + std::to_string(rank) + ".log");
    ASSERT_TRUE(WIFEXITED(statuses[rank]) && WEXITSTATUS(statuses[rank]) == 0)
        << "rank " << rank << " " << harness::DescribeWaitStatus(statuses[rank]) << "\n" << log;
    finals.push_back(LastJsonLine(log));
  }
  const nlohmann::json& ps = finals[0];
  ASSERT_EQ(ps.at("role"), "server") << ps;
  EXPECT_EQ(ps.at("gradients_applied"), 2 * kIterations);
  // SSGD: one update per round of both workers; ASGD: one update per gradient.
  EXPECT_EQ(ps.at("updates"), kSwitchAt + 2 * (kIterations - kSwitchAt));
  for (int rank = 1; rank < 3; ++rank) EXPECT_EQ(finals[rank].at("iterations"), kIterations);
}

}  // namespace
}  // namespace star::shim
