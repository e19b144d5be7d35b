// PipelineEngine with stages as threads over LocalCollective: a chain of scalar layers
// y = a_s * x whose gradients are known in closed form, so any lost, duplicated or
// misrouted micro-batch shows in the gradients.
#include "star/shim/pipeline_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "../engine/engine_test_support.h"
#include "star/core/pipeline/schedule.h"

namespace star::shim {
namespace {

using testing_support::RunRanks;
using std::chrono::milliseconds;

constexpr size_t kWidth = 8;

float Weight(int stage) { return 1.0f + 0.1f * static_cast<float>(stage + 1); }

// One stage of the chain: y = a * x elementwise; the last stage's loss is sum(y). Stage
// 0's input of micro-batch j is `scale` * (j + 1) everywhere.
struct ScalarStage {
  int stage = 0, stages = 1;
  float scale = 1;
  float grad = 0;                                  // dLoss/da summed over micro-batches
  std::map<int, std::vector<float>> inputs;        // kept from forward to backward
  std::vector<pipeline::StageOp> log;
  int in_flight = 0, max_in_flight = 0;

  StageFunctions Functions() {
    StageFunctions f;
    f.forward = [this](int micro, std::span<const float> in, std::vector<float>& out) {
      std::vector<float> x(in.begin(), in.end());
      if (stage == 0) x.assign(kWidth, scale * static_cast<float>(micro + 1));
      if (stage < stages - 1) {
        out.resize(kWidth);
        for (size_t i = 0; i < kWidth; ++i) out[i] = Weight(stage) * x[i];
      }
      inputs[micro] = std::move(x);
      log.push_back({true, micro});
      max_in_flight = std::max(max_in_flight, ++in_flight);
      return Status::Ok();
    };
    f.backward = [this](int micro, std::span<const float> gout, std::vector<float>& gin) {
      std::vector<float> g(gout.begin(), gout.end());
      if (stage == stages - 1) g.assign(kWidth, 1.0f);
      const std::vector<float>& x = inputs.at(micro);
      for (size_t i = 0; i < kWidth; ++i) grad += x[i] * g[i];
      if (stage > 0) {
        gin.resize(kWidth);
        for (size_t i = 0; i < kWidth; ++i) gin[i] = Weight(stage) * g[i];
      }
      inputs.erase(micro);
      log.push_back({false, micro});
      --in_flight;
      return Status::Ok();
    };
    return f;
  }
};

// dLoss/da_s of the whole chain over micro-batches 1..m, input scale `scale`.
double ExpectedGrad(int stage, int stages, int m, double scale) {
  double others = 1;
  for (int t = 0; t < stages; ++t) {
    if (t != stage) others *= Weight(t);
  }
  return static_cast<double>(kWidth) * others * scale * m * (m + 1) / 2.0;
}

PipelineShape Shape(int stages, int stage, int m) {
  PipelineShape s;
  s.stages = stages;
  s.stage = stage;
  s.micro_batches = m;
  s.input_floats = stage > 0 ? kWidth : 0;
  s.output_floats = stage < stages - 1 ? kWidth : 0;
  return s;
}

// Runs `iterations` iterations of `replicas` x `stages` ranks with warm-up depths
// `warmup` (per stage); each stage's ScalarStage after its last iteration.
std::vector<ScalarStage> RunChain(int replicas, int stages, int m, const std::vector<int>& warmup,
                                  int iterations = 1) {
  std::vector<ScalarStage> out(static_cast<size_t>(replicas * stages));
  auto statuses = RunRanks(replicas * stages, milliseconds(10000), [&](int r, std::unique_ptr<Collective> c) {
    ScalarStage& st = out[static_cast<size_t>(r)];
    st.stage = r % stages;
    st.stages = stages;
    st.scale = static_cast<float>(r / stages + 1);
    STAR_ASSIGN_OR_RETURN(auto engine, PipelineEngine::Connect(*c, Shape(stages, st.stage, m), st.Functions()));
    for (int i = 0; i < iterations; ++i) {
      st.grad = 0;
      st.log.clear();
      STAR_RETURN_IF_ERROR(engine->RunIteration(warmup[static_cast<size_t>(st.stage)]));
    }
    return Status::Ok();
  });
  testing_support::ExpectAllOk(statuses);
  return out;
}

void ExpectChainGradients(const std::vector<ScalarStage>& stages, int m) {
  for (const ScalarStage& st : stages) {
    const double want = ExpectedGrad(st.stage, st.stages, m, st.scale);
    EXPECT_NEAR(st.grad, want, 1e-5 * want) << "stage " << st.stage << " scale " << st.scale;
    EXPECT_TRUE(st.inputs.empty()) << "stage " << st.stage << " kept activations";
  }
}

TEST(PipelineEngine, OneFOneBGivesTheWholeModelsGradients) {
  const std::vector<int> warmup = pipeline::OneFOneB(4, 8);
  const auto stages = RunChain(1, 4, 8, warmup, 3);
  ExpectChainGradients(stages, 8);
  for (const ScalarStage& st : stages) {
    const int w = warmup[static_cast<size_t>(st.stage)];
    EXPECT_EQ(st.log, pipeline::StageOps(w, 8)) << "stage " << st.stage;
    EXPECT_EQ(st.max_in_flight, w) << "stage " << st.stage;
  }
}

TEST(PipelineEngine, ADeeperWarmupGivesTheSameGradientsHoldingMoreMicroBatches) {
  const std::vector<int> warmup{7, 5, 3, 1};
  const auto stages = RunChain(1, 4, 8, warmup, 2);
  ExpectChainGradients(stages, 8);
  for (const ScalarStage& st : stages) {
    EXPECT_EQ(st.max_in_flight, warmup[static_cast<size_t>(st.stage)]) << "stage " << st.stage;
  }
}

TEST(PipelineEngine, ReplicasRunApartAtRankReplicaTimesStagesPlusStage) {
  // 2 replicas of 2 stages; replica 1's inputs are twice replica 0's.
  const auto stages = RunChain(2, 2, 4, pipeline::OneFOneB(2, 4));
  ASSERT_EQ(stages.size(), 4u);
  ExpectChainGradients(stages, 4);
  EXPECT_NEAR(stages[3].grad, 2 * stages[1].grad, 1e-5 * stages[3].grad);
}

TEST(PipelineEngine, LinksCountEveryMessageEachWayAndComputeEveryStep) {
  constexpr int kStages = 3, kMicro = 5;
  std::vector<std::vector<PipelineLink>> links(kStages), second(kStages);
  std::vector<PipelineComputeTimes> compute(kStages), compute_again(kStages);
  auto statuses = RunRanks(kStages, milliseconds(10000), [&](int r, std::unique_ptr<Collective> c) {
    ScalarStage st;
    st.stage = r;
    st.stages = kStages;
    STAR_ASSIGN_OR_RETURN(auto engine, PipelineEngine::Connect(*c, Shape(kStages, r, kMicro), st.Functions()));
    STAR_RETURN_IF_ERROR(engine->RunIteration(kStages - r));
    links[static_cast<size_t>(r)] = engine->TakeLinks();
    second[static_cast<size_t>(r)] = engine->TakeLinks();
    compute[static_cast<size_t>(r)] = engine->TakeComputeTimes();
    compute_again[static_cast<size_t>(r)] = engine->TakeComputeTimes();
    return Status::Ok();
  });
  testing_support::ExpectAllOk(statuses);
  const int64_t bytes = kMicro * static_cast<int64_t>(kWidth * sizeof(float));
  for (int r = 0; r < kStages; ++r) {
    const auto& l = links[static_cast<size_t>(r)];
    ASSERT_EQ(l.size(), r == 1 ? 2u : 1u) << "stage " << r;
    std::vector<int> peers;
    for (const PipelineLink& p : l) {
      peers.push_back(p.peer);
      EXPECT_EQ(p.messages_sent, kMicro);
      EXPECT_EQ(p.bytes_sent, bytes);
      EXPECT_EQ(p.messages_received, kMicro);
      EXPECT_EQ(p.bytes_received, bytes);
      EXPECT_GE(p.send_seconds, 0);
      EXPECT_GE(p.wait_seconds, 0);
    }
    EXPECT_TRUE(std::is_sorted(peers.begin(), peers.end())) << "previous neighbour first";
    for (const PipelineLink& p : second[static_cast<size_t>(r)]) {
      EXPECT_EQ(p.messages_sent + p.messages_received, 0) << "counters start afresh";
    }
    const PipelineComputeTimes& c = compute[static_cast<size_t>(r)];
    EXPECT_EQ(c.forwards, kMicro);
    EXPECT_EQ(c.backwards, kMicro);
    EXPECT_GE(c.forward_seconds, 0);
    EXPECT_GE(c.backward_seconds, 0);
    EXPECT_EQ(compute_again[static_cast<size_t>(r)].forwards + compute_again[static_cast<size_t>(r)].backwards, 0);
  }
}

TEST(PipelineEngine, ADelayedLinkGivesTheSameGradientsAndCountsItsDelayAsLatency) {
  constexpr int kStages = 3, kMicro = 4;
  constexpr double kDelay = 0.002;
  std::vector<ScalarStage> out(kStages);
  std::vector<std::vector<PipelineLink>> links(kStages);
  auto statuses = RunRanks(kStages, milliseconds(10000), [&](int r, std::unique_ptr<Collective> c) {
    ScalarStage& st = out[static_cast<size_t>(r)];
    st.stage = r;
    st.stages = kStages;
    PipelineShape shape = Shape(kStages, r, kMicro);
    // The link between stages 1 and 2 is delayed both ways.
    if (r == 1) shape.next_delay_seconds = kDelay;
    if (r == 2) shape.prev_delay_seconds = kDelay;
    STAR_ASSIGN_OR_RETURN(auto engine, PipelineEngine::Connect(*c, shape, st.Functions()));
    STAR_RETURN_IF_ERROR(engine->RunIteration(kStages - r));
    links[static_cast<size_t>(r)] = engine->TakeLinks();
    return Status::Ok();
  });
  testing_support::ExpectAllOk(statuses);
  ExpectChainGradients(out, kMicro);
  for (int r = 0; r < kStages; ++r) {
    for (const PipelineLink& l : links[static_cast<size_t>(r)]) {
      const bool delayed = (r == 1 && l.peer == 2) || (r == 2 && l.peer == 1);
      // The delay is the link's latency, apart from its sending time.
      EXPECT_DOUBLE_EQ(l.latency_seconds, delayed ? kMicro * kDelay : 0) << "stage " << r << " to " << l.peer;
      // Stage 2 has nothing to run before stage 1's first activation, held kDelay.
      if (r == 2 && l.peer == 1) {
        EXPECT_GE(l.wait_seconds, kDelay);
      }
    }
  }
}

TEST(PipelineEngine, BadShapesAndDepthsAreRefusedNamingTheField) {
  auto group = NewLocalGroup(1, milliseconds(1000));
  ScalarStage st;
  auto refused = [&](PipelineShape shape) {
    auto e = PipelineEngine::Connect(*group[0], shape, st.Functions());
    return e.ok() ? std::string("accepted") : e.status().message();
  };
  PipelineShape s = Shape(1, 0, 2);
  s.micro_batches = 0;
  EXPECT_NE(refused(s).find("micro_batches: must be in [stages (1), 1024], got 0"), std::string::npos);
  EXPECT_NE(refused(Shape(2, 1, 4)).find("stage: rank 0 holds stage 0 of 2, not 1"), std::string::npos);
  EXPECT_NE(refused(Shape(2, 0, 4)).find("stages: the replica of rank 0 needs ranks up to 1"), std::string::npos);
  s = Shape(1, 0, 2);
  s.prev_delay_seconds = -1;
  EXPECT_NE(refused(s).find("prev_delay_seconds: must be in [0, 10]"), std::string::npos) << refused(s);
  auto engine = PipelineEngine::Connect(*group[0], Shape(1, 0, 2), st.Functions());
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->RunIteration(3).message(), "pipeline: warmup: must be in [1, micro_batches (2)], got 3");
  EXPECT_TRUE((*engine)->RunIteration(2).ok()) << "a refused depth leaves the engine usable";
}

TEST(PipelineEngine, AnActivationOfTheWrongSizeIsAnErrorNamingTheShape) {
  auto statuses = RunRanks(2, milliseconds(1000), [&](int r, std::unique_ptr<Collective> c) {
    ScalarStage st;
    st.stage = r;
    st.stages = 2;
    StageFunctions f = st.Functions();
    if (r == 0) {
      auto forward = f.forward;
      f.forward = [forward](int micro, std::span<const float> in, std::vector<float>& out) {
        Status s = forward(micro, in, out);
        out.pop_back();
        return s;
      };
    }
    STAR_ASSIGN_OR_RETURN(auto engine, PipelineEngine::Connect(*c, Shape(2, r, 2), std::move(f)));
    return engine->RunIteration(2 - r);
  });
  EXPECT_EQ(statuses[0].message(), "pipeline: the forward of micro-batch 0 gave 7 floats, output_floats is 8");
  EXPECT_FALSE(statuses[1].ok());
}

TEST(PipelineEngine, AFailingStageFailsEveryStageWithoutHanging) {
  constexpr int kStages = 4;
  // Bounded by the timeout: stage 2's engine may wait that long for a receive it posted
  // from stage 1, which waits on stage 2's gradients.
  auto statuses = RunRanks(kStages, milliseconds(1000), [&](int r, std::unique_ptr<Collective> c) {
    ScalarStage st;
    st.stage = r;
    st.stages = kStages;
    StageFunctions f = st.Functions();
    if (r == 2) {
      auto forward = f.forward;
      f.forward = [forward](int micro, std::span<const float> in, std::vector<float>& out) {
        if (micro == 3) return Status::Internal("stage 2 fails");
        return forward(micro, in, out);
      };
    }
    STAR_ASSIGN_OR_RETURN(auto engine, PipelineEngine::Connect(*c, Shape(kStages, r, 8), std::move(f)));
    Status first = engine->RunIteration(kStages - r);
    if (first.ok()) first = engine->RunIteration(kStages - r);
    return first;
  });
  ASSERT_EQ(statuses.size(), 4u);
  EXPECT_EQ(statuses[2].message(), "stage 2 fails");
  for (int r : {0, 1, 3}) EXPECT_FALSE(statuses[static_cast<size_t>(r)].ok()) << "stage " << r;
}

}  // namespace
}  // namespace star::shim
