#include "star/core/pipeline/schedule.h"

#include <limits>
#include <random>

#include <gtest/gtest.h>

namespace star::pipeline {
namespace {

// S stages of equal forward / backward cost and links of equal cost.
PipelineCosts Uniform(int stages, int micro, double forward, double backward, double link) {
  PipelineCosts c;
  c.stages.assign(static_cast<size_t>(stages), StageCost{forward, backward});
  c.links.assign(static_cast<size_t>(stages - 1), LinkCost{link, link});
  c.micro_batches = micro;
  return c;
}

TEST(PipelineModel, OneFOneBOnFreeLinksTakesTheTextbookTime) {
  // (M + S - 1) (t_F + t_B): the fill and drain bubbles of S - 1 slots.
  for (int s : {1, 2, 4, 8}) {
    for (int m : {s, 2 * s, 3 * s + 1}) {
      const PipelineCosts c = Uniform(s, m, 1.0, 2.0, 0.0);
      auto t = IterationSeconds(c, OneFOneB(s, m));
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_DOUBLE_EQ(*t, (m + s - 1) * 3.0) << "S " << s << " M " << m;
    }
  }
}

TEST(PipelineModel, OneFOneBDepthsAreStagesAhead) {
  EXPECT_EQ(OneFOneB(4, 8), (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(OneFOneB(4, 2), (std::vector<int>{2, 2, 2, 1}));
}

TEST(PipelineModel, AStageRunsItsWarmupThenOneBackwardOneForward) {
  using Ops = std::vector<StageOp>;
  EXPECT_EQ(StageOps(2, 4), (Ops{{true, 0}, {true, 1}, {false, 0}, {true, 2}, {false, 1},
                                 {true, 3}, {false, 2}, {false, 3}}));
  EXPECT_EQ(StageOps(1, 2), (Ops{{true, 0}, {false, 0}, {true, 1}, {false, 1}}));
  // Depths outside [1, M] are clamped: all forwards first at M or more.
  EXPECT_EQ(StageOps(9, 2), (Ops{{true, 0}, {true, 1}, {false, 0}, {false, 1}}));
  EXPECT_EQ(StageOps(0, 2), StageOps(1, 2));
  EXPECT_TRUE(StageOps(1, 0).empty());
}

TEST(PipelineModel, WithoutASlowLinkTheRuleIsPlainOneFOneB) {
  auto w = AdaptedWarmup(Uniform(4, 8, 1.0, 2.0, 0.1), std::nullopt);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(*w, OneFOneB(4, 8));
  // On free links nothing beats 1F1B; transfers of 0.1 s on every hop are hidden by
  // a deeper warm-up too (the search finds it), by a little.
  auto free = ChooseWarmup(Uniform(4, 8, 1.0, 2.0, 0.0), std::nullopt);
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_DOUBLE_EQ(free->predicted_seconds, free->static_seconds);
  EXPECT_EQ(free->warmup, OneFOneB(4, 8));
  auto hops = ChooseWarmup(Uniform(4, 8, 1.0, 2.0, 0.1), std::nullopt);
  ASSERT_TRUE(hops.ok()) << hops.status();
  EXPECT_LE(hops->predicted_seconds, hops->static_seconds);
  EXPECT_GT(hops->predicted_seconds, hops->static_seconds * 0.9);
}

// Stage 1 -> 2 takes 3 forwards' time each way: 1F1B stalls on every gradient it waits
// for; a deeper warm-up upstream keeps stages 0 and 1 busy meanwhile.
TEST(PipelineModel, ADeeperWarmupAheadOfASlowLinkAbsorbsIt) {
  PipelineCosts c = Uniform(4, 8, 1.0, 2.0, 0.1);
  c.links[1] = {3.0, 3.0};
  auto w = AdaptedWarmup(c, std::nullopt);
  ASSERT_TRUE(w.ok()) << w.status();
  // w_3 = 1, w_2 = 2, w_1 = 2 + 1 + ceil(5.8 / 1), w_0 = w_1 + 1 (capped by M = 8).
  EXPECT_EQ(*w, (std::vector<int>{8, 8, 2, 1}));
  auto plan = ChooseWarmup(c, std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_LT(plan->predicted_seconds, plan->static_seconds / 1.2)
      << "static " << plan->static_seconds << " adapted " << plan->predicted_seconds;
  EXPECT_GT(plan->warmup[1], OneFOneB(4, 8)[1]);
}

// Two stages, forwards of 1 s, backwards free, M = 4, the warm-up all four forwards. An
// activation link with 3 s of latency delivers micro-batch j at j + 1 + 3; one whose
// transfers take 3 s carries one at a time, delivering at 4, 7, 10, 13.
TEST(PipelineModel, LatencyDelaysMessagesWithoutOccupyingTheLink) {
  PipelineCosts c = Uniform(2, 4, 1.0, 0.0, 0.0);
  c.links[0].activation_latency_seconds = 3.0;
  auto latency = IterationSeconds(c, {4, 1});
  ASSERT_TRUE(latency.ok()) << latency.status();
  EXPECT_DOUBLE_EQ(*latency, 4 + 3 + 1);  // the last activation made at 4, held 3, run 1
  c.links[0] = {3.0, 0.0};
  auto occupied = IterationSeconds(c, {4, 1});
  ASSERT_TRUE(occupied.ok());
  EXPECT_DOUBLE_EQ(*occupied, 13 + 1);
  // The rule sees a round trip either way.
  PipelineCosts slow = Uniform(4, 8, 1.0, 2.0, 0.1);
  slow.links[1] = {0.1, 0.1, 2.9, 2.9};
  EXPECT_DOUBLE_EQ(RoundTripSeconds(slow.links[1]), 6.0);
  auto w = AdaptedWarmup(slow, std::nullopt);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(*w, (std::vector<int>{8, 8, 2, 1}));
}

TEST(PipelineModel, TheMemoryBoundCapsEveryDepth) {
  PipelineCosts c = Uniform(4, 8, 1.0, 2.0, 0.1);
  c.links[1] = {3.0, 3.0};
  auto plan = ChooseWarmup(c, 5);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (int w : plan->warmup) EXPECT_LE(w, 5);
  EXPECT_LE(plan->predicted_seconds, plan->static_seconds);
  auto unbounded = ChooseWarmup(c, std::nullopt);
  ASSERT_TRUE(unbounded.ok());
  EXPECT_LE(unbounded->predicted_seconds, plan->predicted_seconds) << "more memory never hurts";
}

TEST(PipelineModel, NeverSlowerThanOneFOneBOnRandomCosts) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.0, 2.0);
  for (int trial = 0; trial < 200; ++trial) {
    const int s = 2 + trial % 5;
    PipelineCosts c = Uniform(s, s + trial % 7, 1.0, 2.0, 0.0);
    for (StageCost& st : c.stages) st = {u(rng), u(rng)};
    for (LinkCost& l : c.links) l = {u(rng) * u(rng), u(rng) * u(rng)};
    auto plan = ChooseWarmup(c, std::nullopt);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_LE(plan->predicted_seconds, plan->static_seconds) << "trial " << trial;
    auto again = IterationSeconds(c, plan->warmup);
    ASSERT_TRUE(again.ok());
    EXPECT_DOUBLE_EQ(*again, plan->predicted_seconds) << "the plan's prediction is the model's";
  }
}

TEST(PipelineModel, BadInputIsRefusedNamingTheField) {
  PipelineCosts c = Uniform(4, 8, 1.0, 2.0, 0.1);
  EXPECT_EQ(IterationSeconds(c, {4, 3, 2}).status().message(),
            "warmup: must have one depth per stage (4), got 3");
  EXPECT_EQ(IterationSeconds(c, {3, 4, 2, 1}).status().message(),
            "warmup[1]: must be <= the stage before it (3): that stage never sends the "
            "activations it would wait for");
  EXPECT_EQ(IterationSeconds(c, {9, 3, 2, 1}).status().message(), "warmup[0]: must be in [1, 8], got 9");
  EXPECT_EQ(ChooseWarmup(c, 3).status().message(),
            "max_in_flight: must be >= the stages (4): 1F1B holds that many on the first stage, got 3");
  PipelineCosts few = c;
  few.micro_batches = 3;
  EXPECT_EQ(Validate(few).message(), "micro_batches: must be in [4, 1024], got 3");
  PipelineCosts links = c;
  links.links.pop_back();
  EXPECT_EQ(Validate(links).message(), "links: must have one entry per pair of neighbouring stages (3), got 2");
  PipelineCosts nan = c;
  nan.stages[2].backward_seconds = -1;
  EXPECT_EQ(Validate(nan).message(), "stages[2]: costs must be finite and >= 0");
  PipelineCosts held = c;
  held.links[1].gradient_latency_seconds = std::numeric_limits<double>::infinity();
  EXPECT_EQ(Validate(held).message(), "links[1]: costs must be finite and >= 0");
  EXPECT_EQ(Validate(PipelineCosts{}).message(), "stages: must have 1 to 64 entries, got 0");
}

}  // namespace
}  // namespace star::pipeline
