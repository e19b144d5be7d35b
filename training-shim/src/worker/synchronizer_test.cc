#include "star/shim/synchronizer.h"

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine_test_support.h"
#include "star/shim/local_collective.h"
#include "star/shim/parameter_server.h"

namespace star::shim {
namespace {

using testing_support::ExpectAllOk;
using testing_support::RunRanks;

constexpr auto kTimeout = std::chrono::seconds(20);
constexpr size_t kDim = 4;

SynchronizerOptions Sgd(int servers = 0) {
  SynchronizerOptions o;
  o.parameter_servers = servers;
  o.optimizer = SgdOptions{1.0f, 0.0f, 0.0f};
  o.timeout = kTimeout;
  return o;
}

// Worker w's gradient: every element (w + 1) per sample, summed over its batch w + 1.
std::vector<float> GradSum(int w) { return std::vector<float>(kDim, float((w + 1) * (w + 1))); }

// sum over workers of (w+1)^2 / sum of (w+1): what one SGD step with lr 1 subtracts.
float ExpectedStep(int workers) {
  float g = 0, b = 0;
  for (int w = 0; w < workers; ++w) {
    g += float((w + 1) * (w + 1));
    b += float(w + 1);
  }
  return g / b;
}

class AllReduce : public ::testing::TestWithParam<int> {};

TEST_P(AllReduce, SsgdWeightsEveryWorkersGradientByItsBatch) {
  const int n = GetParam();
  std::vector<std::vector<float>> params(n);
  ExpectAllOk(RunRanks(n, kTimeout, [&](int rank, std::unique_ptr<Collective> world) -> Status {
    STAR_ASSIGN_OR_RETURN(auto sync, Synchronizer::Create(std::move(world),
                                                          std::vector<float>(kDim, 0.0f), Sgd()));
    STAR_ASSIGN_OR_RETURN(StepStats st, sync->Step(GradSum(rank), rank + 1));
    if (st.iteration != 1) return Status::Internal("iteration " + std::to_string(st.iteration));
    params[rank].assign(sync->params().begin(), sync->params().end());
    return sync->Finish();
  }));
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(params[r].size(), kDim);
    for (float p : params[r]) EXPECT_FLOAT_EQ(p, -ExpectedStep(n)) << "rank " << r;
  }
}

TEST_P(AllReduce, WorkersHoldTheSameParametersAfterSwitchingThroughGroups) {
  const int n = GetParam();
  api::Decision groups;
  groups.epoch = 1;
  groups.apply_at_iteration = 2;
  groups.mode = api::SyncMode::kGroups;
  groups.k = 1;
  for (int r = 0; r < n; ++r) groups.groups.push_back({r});  // every worker alone
  api::Decision ssgd;
  ssgd.epoch = 2;
  ssgd.apply_at_iteration = 4;
  ssgd.mode = api::SyncMode::kSsgd;
  ssgd.k = n;
  std::vector<std::vector<float>> params(n);
  std::vector<api::SyncMode> modes(n, api::SyncMode::kSsgd);
  ExpectAllOk(RunRanks(n, kTimeout, [&](int rank, std::unique_ptr<Collective> world) -> Status {
    STAR_ASSIGN_OR_RETURN(auto sync, Synchronizer::Create(std::move(world),
                                                          std::vector<float>(kDim, 0.0f), Sgd()));
    STAR_RETURN_IF_ERROR(sync->Schedule(groups));
    STAR_RETURN_IF_ERROR(sync->Schedule(ssgd));
    // Until iteration 5, not 5 calls: leaving groups, a worker behind the first to reach
    // the decision's iteration jumps to it, so the workers make different numbers of calls.
    for (int calls = 0; sync->iteration() < 5 && calls < 10; ++calls) {
      STAR_RETURN_IF_ERROR(sync->Step(GradSum(rank), rank + 1).status());
      if (sync->iteration() == 3) modes[rank] = sync->mode();  // in groups
    }
    params[rank].assign(sync->params().begin(), sync->params().end());
    return Status::Ok();
  }));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(modes[r], api::SyncMode::kGroups) << "rank " << r;
    EXPECT_EQ(params[r], params[0]) << "rank " << r;
  }
}

TEST_P(AllReduce, APeerThatIsGoneFailsTheStepInsteadOfHanging) {
  const int n = GetParam();
  auto statuses = RunRanks(n, std::chrono::milliseconds(2000),
                           [&](int rank, std::unique_ptr<Collective> world) -> Status {
    STAR_ASSIGN_OR_RETURN(auto sync, Synchronizer::Create(std::move(world),
                                                          std::vector<float>(kDim, 0.0f), Sgd()));
    if (rank == n - 1) return Status::Ok();  // leaves: its communicator is destroyed
    return sync->Step(GradSum(rank), 1).status();
  });
  for (int r = 0; r + 1 < n; ++r) {
    EXPECT_TRUE(statuses[r].code() == StatusCode::kUnavailable ||
                statuses[r].code() == StatusCode::kDeadlineExceeded)
        << "rank " << r << ": " << statuses[r];
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllReduce, ::testing::Values(2, 3, 4));

class ParameterServerJob : public ::testing::TestWithParam<int> {};

// One server (rank 0) and `workers` workers; returns the server's stats.
ServerStats RunPsJob(int workers, const std::function<Status(Synchronizer&, int)>& worker_fn) {
  ServerStats stats;
  ExpectAllOk(RunRanks(workers + 1, kTimeout, [&](int rank, std::unique_ptr<Collective> world) -> Status {
    const std::vector<float> initial(kDim, 0.0f);
    if (rank == 0) {
      STAR_ASSIGN_OR_RETURN(auto server, ParameterServer::Create(std::move(world), 1, {kDim}, initial,
                                                                 SgdOptions{1.0f, 0.0f, 0.0f},
                                                                 PsOptions{kTimeout}));
      STAR_RETURN_IF_ERROR(server->Run());
      stats = server->stats();
      return Status::Ok();
    }
    STAR_ASSIGN_OR_RETURN(auto sync, Synchronizer::Create(std::move(world), initial, Sgd(1)));
    STAR_RETURN_IF_ERROR(worker_fn(*sync, rank - 1));
    return sync->Finish();
  }));
  return stats;
}

TEST_P(ParameterServerJob, SsgdMatchesTheAllReduceUpdate) {
  const int n = GetParam();
  std::vector<std::vector<float>> params(n);
  RunPsJob(n, [&](Synchronizer& sync, int w) -> Status {
    STAR_RETURN_IF_ERROR(sync.Step(GradSum(w), w + 1).status());
    params[w].assign(sync.params().begin(), sync.params().end());
    return Status::Ok();
  });
  for (int w = 0; w < n; ++w) {
    ASSERT_EQ(params[w].size(), kDim);
    for (float p : params[w]) EXPECT_FLOAT_EQ(p, -ExpectedStep(n)) << "worker " << w;
  }
}

TEST_P(ParameterServerJob, AfterASwitchToAsgdEveryGradientIsItsOwnUpdate) {
  const int n = GetParam();
  constexpr int kIterations = 6, kSwitchAt = 2;
  api::Decision asgd;
  asgd.epoch = 1;
  asgd.apply_at_iteration = kSwitchAt;
  asgd.mode = api::SyncMode::kAsgd;
  asgd.k = 1;
  const ServerStats stats = RunPsJob(n, [&](Synchronizer& sync, int w) -> Status {
    STAR_RETURN_IF_ERROR(sync.Schedule(asgd));
    for (int i = 0; i < kIterations; ++i) STAR_RETURN_IF_ERROR(sync.Step(GradSum(w), w + 1).status());
    return sync.mode() == api::SyncMode::kAsgd ? Status::Ok() : Status::Internal("not in asgd");
  });
  EXPECT_EQ(stats.gradients_applied, n * kIterations);
  EXPECT_EQ(stats.updates, kSwitchAt + n * (kIterations - kSwitchAt));
}

INSTANTIATE_TEST_SUITE_P(Workers, ParameterServerJob, ::testing::Values(2, 3));

TEST(Synchronizer, BadArgumentsNameTheField) {
  auto world = NewLocalGroup(1, kTimeout);
  auto empty = Synchronizer::Create(std::move(world[0]), {}, Sgd());
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("initial_params"), std::string::npos);

  world = NewLocalGroup(2, kTimeout);
  auto sizes = Sgd(1);
  sizes.tensor_sizes = {1, 2};
  auto bad = Synchronizer::Create(std::move(world[1]), std::vector<float>(kDim, 0.0f), sizes);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tensor_sizes"), std::string::npos);
}

TEST(Synchronizer, ALoneWorkerRejectsAsgdAndStepsNoMoreAfterFinish) {
  auto world = NewLocalGroup(1, kTimeout);
  auto sync = Synchronizer::Create(std::move(world[0]), std::vector<float>(kDim, 0.0f), Sgd());
  ASSERT_TRUE(sync.ok()) << sync.status();
  api::Decision asgd;
  asgd.epoch = 1;
  asgd.apply_at_iteration = 1;
  asgd.mode = api::SyncMode::kAsgd;
  asgd.k = 1;
  EXPECT_EQ((*sync)->Schedule(asgd).code(), StatusCode::kUnimplemented);
  EXPECT_TRUE((*sync)->Step(GradSum(0), 1).ok());
  EXPECT_FLOAT_EQ((*sync)->params()[0], -1.0f);
  ASSERT_TRUE((*sync)->Finish().ok());
  EXPECT_EQ((*sync)->Step(GradSum(0), 1).status().code(), StatusCode::kFailedPrecondition);
}

TEST(Synchronizer, ConnectRefusesAParameterServerRank) {
  WorkerConfig config;
  config.parameter_servers = 1;
  config.rank = 0;
  auto sync = Synchronizer::Connect(config, std::vector<float>(kDim, 0.0f), Sgd());
  ASSERT_FALSE(sync.ok());
  EXPECT_NE(sync.status().message().find("rank"), std::string::npos) << sync.status();
}

}  // namespace
}  // namespace star::shim
