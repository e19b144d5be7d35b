#include "star/core/batch/planner.h"

#include <glpk.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <queue>
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "batch/planner_internal.h"

namespace star::batch {
namespace {

double Cost(const WorkerModel& w, int64_t b) { return w.alpha * static_cast<double>(b) + w.beta; }

double Makespan(const PlanInput& in, const std::vector<int64_t>& b) {
  double m = 0;
  for (size_t i = 0; i < b.size(); ++i) m = std::max(m, Cost(in.workers[i], b[i]));
  return m;
}

// Reference 1: the same problem as an ILP solved by GLPK. Returns the makespan of
// GLPK's integer solution, evaluated exactly like the planner evaluates costs.
double GlpkOptimum(const PlanInput& in) {
  const int n = static_cast<int>(in.workers.size());
  glp_prob* lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  glp_add_cols(lp, n + 1);  // columns 1..n: b_i; column n+1: T
  for (int i = 1; i <= n; ++i) {
    glp_set_col_kind(lp, i, GLP_IV);
    glp_set_col_bnds(lp, i, GLP_LO, static_cast<double>(in.min_batch), 0);
  }
  glp_set_col_bnds(lp, n + 1, GLP_FR, 0, 0);
  glp_set_obj_coef(lp, n + 1, 1.0);
  glp_add_rows(lp, n + 1);
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0};
  for (int i = 1; i <= n; ++i) {  // alpha_i b_i - T <= -beta_i
    glp_set_row_bnds(lp, i, GLP_UP, 0, -in.workers[i - 1].beta);
    ia.push_back(i), ja.push_back(i), ar.push_back(in.workers[i - 1].alpha);
    ia.push_back(i), ja.push_back(n + 1), ar.push_back(-1.0);
  }
  glp_set_row_bnds(lp, n + 1, GLP_FX, static_cast<double>(in.global_batch),
                   static_cast<double>(in.global_batch));
  for (int i = 1; i <= n; ++i) ia.push_back(n + 1), ja.push_back(i), ar.push_back(1.0);
  glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  parm.msg_lev = GLP_MSG_OFF;
  int rc = glp_intopt(lp, &parm);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(glp_mip_status(lp), GLP_OPT);
  std::vector<int64_t> b(static_cast<size_t>(n));
  for (int i = 1; i <= n; ++i) b[static_cast<size_t>(i - 1)] = std::llround(glp_mip_col_val(lp, i));
  glp_delete_prob(lp);
  EXPECT_EQ(std::accumulate(b.begin(), b.end(), int64_t{0}), in.global_batch);
  return Makespan(in, b);
}

// Reference 2: hand out the extra samples one at a time to the worker that finishes
// earliest with it; ties to the smaller batch, then the lower index.
std::vector<int64_t> Greedy(const PlanInput& in) {
  const size_t n = in.workers.size();
  std::vector<int64_t> b(n, in.min_batch);
  using Key = std::tuple<double, int64_t, size_t>;
  std::priority_queue<Key, std::vector<Key>, std::greater<>> q;
  for (size_t i = 0; i < n; ++i) q.emplace(Cost(in.workers[i], b[i] + 1), b[i] + 1, i);
  for (int64_t e = in.global_batch - in.min_batch * static_cast<int64_t>(n); e > 0; --e) {
    auto [c, next, i] = q.top();
    q.pop();
    b[i] = next;
    q.emplace(Cost(in.workers[i], next + 1), next + 1, i);
  }
  return b;
}

// Random instances: n in 1..12, G up to a few thousand; alpha = 0 workers, copies of
// the previous worker, and (in `dyadic` mode) exactly representable costs with many ties.
PlanInput RandomInstance(std::mt19937_64& rng, bool dyadic) {
  std::uniform_int_distribution<int> nd(1, 12), md(1, 8), kind(0, 9), small(0, 32);
  std::uniform_int_distribution<int64_t> gd(0, 3000);
  std::uniform_real_distribution<double> ad(0.0005, 0.05), bd(0.0, 0.5);
  PlanInput in;
  in.min_batch = md(rng);
  const int n = nd(rng);
  for (int i = 0; i < n; ++i) {
    WorkerModel w;
    int k = kind(rng);
    if (k == 0) {
      w.alpha = 0;
      w.beta = dyadic ? small(rng) / 8.0 : bd(rng);
    } else if (k <= 2 && i > 0) {
      w = in.workers.back();
    } else if (dyadic) {
      w.alpha = (1 + small(rng)) / 64.0;
      w.beta = small(rng) / 4.0;
    } else {
      w.alpha = ad(rng);
      w.beta = k == 3 ? 0 : bd(rng);
    }
    in.workers.push_back(w);
  }
  in.global_batch = in.min_batch * n + gd(rng);
  return in;
}

void ExpectFeasible(const PlanInput& in, const BatchPlan& p) {
  ASSERT_EQ(p.batches.size(), in.workers.size());
  EXPECT_EQ(std::accumulate(p.batches.begin(), p.batches.end(), int64_t{0}), in.global_batch);
  for (int64_t b : p.batches) EXPECT_GE(b, in.min_batch);
  EXPECT_EQ(p.makespan_seconds, Makespan(in, p.batches));
}

TEST(PlanBatches, MakespanEqualsGlpkIlpOptimumOnRandomInstances) {
  std::mt19937_64 rng(20240611);
  for (int t = 0; t < 300; ++t) {
    PlanInput in = RandomInstance(rng, t % 3 == 0);
    auto plan = PlanBatches(in);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectFeasible(in, *plan);
    double ilp = GlpkOptimum(in);
    EXPECT_NEAR(plan->makespan_seconds, ilp, 1e-9 * std::max(1.0, ilp)) << "instance " << t;
  }
}

TEST(PlanBatches, EqualsGreedyOracleIncludingTieBreaking) {
  std::mt19937_64 rng(7);
  for (int t = 0; t < 500; ++t) {
    PlanInput in = RandomInstance(rng, t % 2 == 0);
    auto plan = PlanBatches(in);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectFeasible(in, *plan);
    EXPECT_EQ(plan->batches, Greedy(in)) << "instance " << t;
  }
}

TEST(PlanBatches, BisectionFallbackGivesTheSamePlans) {
  std::mt19937_64 rng(99);
  for (int t = 0; t < 300; ++t) {
    PlanInput in = RandomInstance(rng, t % 2 == 1);
    auto a = internal::PlanBatchesWith(in, internal::Search::kAuto);
    auto b = internal::PlanBatchesWith(in, internal::Search::kBisection);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->batches, b->batches) << "instance " << t;
    EXPECT_EQ(a->makespan_seconds, b->makespan_seconds);
  }
}

TEST(PlanBatches, LargeInstanceMatchesGreedyOracle) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> ad(0.001, 0.01), bd(0.0, 0.05);
  PlanInput in;
  in.min_batch = 8;
  for (int i = 0; i < 512; ++i) in.workers.push_back({ad(rng), bd(rng)});
  in.global_batch = 256 * 512;
  auto plan = PlanBatches(in);
  ASSERT_TRUE(plan.ok());
  ExpectFeasible(in, *plan);
  EXPECT_EQ(plan->batches, Greedy(in));
}

TEST(PlanBatches, EqualWorkersSplitEvenlyLowerIndexFirst) {
  PlanInput in{.global_batch = 10, .min_batch = 1, .workers = {{1, 0}, {1, 0}, {1, 0}, {1, 0}}};
  auto plan = PlanBatches(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->batches, (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(plan->makespan_seconds, 3.0);
}

TEST(PlanBatches, FasterWorkerGetsProportionallyMore) {
  // t0 = b, t1 = 3b: the optimum of G = 40 is 30/10 with makespan 30.
  PlanInput in{.global_batch = 40, .min_batch = 1, .workers = {{1, 0}, {3, 0}}};
  auto plan = PlanBatches(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->batches, (std::vector<int64_t>{30, 10}));
  EXPECT_EQ(plan->makespan_seconds, 30.0);
}

TEST(PlanBatches, ZeroAlphaWorkerAbsorbsLeftoverWithoutRaisingMakespan) {
  // Worker 1's time does not depend on its batch (0.5 s): every extra sample goes to
  // it and the makespan stays at the lower bound max_i t_i(M) = 1 + 2 = 3.
  PlanInput in{.global_batch = 1000, .min_batch = 1, .workers = {{1, 2}, {0, 0.5}}};
  auto plan = PlanBatches(in);
  ASSERT_TRUE(plan.ok());
  ExpectFeasible(in, *plan);
  EXPECT_EQ(plan->makespan_seconds, 3.0);
  EXPECT_EQ(plan->batches, (std::vector<int64_t>{1, 999}));
}

TEST(PlanBatches, GlobalBatchEqualToMinimumGivesEveryoneTheMinimum) {
  PlanInput in{.global_batch = 12, .min_batch = 4, .workers = {{1, 0}, {2, 1}, {0, 9}}};
  auto plan = PlanBatches(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->batches, (std::vector<int64_t>{4, 4, 4}));
  EXPECT_EQ(plan->makespan_seconds, 9.0);
}

TEST(Validate, RejectsInfeasibleAndMalformedInputNamingTheField) {
  PlanInput in{.global_batch = 10, .min_batch = 16, .workers = {{1, 0}, {1, 0}, {1, 0}, {1, 0}}};
  EXPECT_EQ(Validate(in).message(), "global_batch: must be >= min_batch * workers (= 64), got 10");
  EXPECT_FALSE(PlanBatches(in).ok());

  in = {.global_batch = 10, .min_batch = 1, .workers = {}};
  EXPECT_EQ(Validate(in).message(), "workers: must not be empty");
  EXPECT_EQ(PlanBatches(in).status().code(), StatusCode::kInvalidArgument);

  in = {.global_batch = 10, .min_batch = 1, .workers = {{1, 0}, {1, 0}, {-1, 0}}};
  EXPECT_EQ(Validate(in).message(), "workers[2].alpha: must be >= 0, got -1");
  in.workers[2] = {1, NAN};
  EXPECT_EQ(Validate(in).message(), "workers[2].beta: must be a finite number");
  in.workers[2] = {1, 0};
  in.min_batch = 0;
  EXPECT_EQ(Validate(in).message(), "min_batch: must be >= 1, got 0");
  in.min_batch = 1;
  EXPECT_TRUE(Validate(in).ok());
}

TEST(Codec, DecodesTheCliInputAndEncodesExactlyBatchesAndMakespan) {
  auto in = PlanInputFromJson(nlohmann::json::parse(
      R"({"global_batch":12,"min_batch":2,"workers":[{"alpha":0.5,"beta":1},{"alpha":1,"beta":0}]})"));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->global_batch, 12);
  EXPECT_EQ(in->min_batch, 2);
  ASSERT_EQ(in->workers.size(), 2u);
  EXPECT_EQ(in->workers[0].alpha, 0.5);
  EXPECT_EQ(in->workers[1].beta, 0.0);

  auto defaulted = PlanInputFromJson(
      nlohmann::json::parse(R"({"global_batch":3,"workers":[{"alpha":1,"beta":0}]})"));
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(defaulted->min_batch, 1);

  nlohmann::json out = ToJson(BatchPlan{{5, 7}, 3.5});
  EXPECT_EQ(out, nlohmann::json::parse(R"({"batches":[5,7],"makespan_seconds":3.5})"));
}

TEST(Codec, RejectsMalformedInputNamingTheField) {
  auto err = [](const char* text) {
    return PlanInputFromJson(nlohmann::json::parse(text)).status().message();
  };
  EXPECT_EQ(err("[1,2]"), "document: must be an object, got array");
  EXPECT_EQ(err(R"({"workers":[]})"), "global_batch: required field is missing");
  EXPECT_EQ(err(R"({"global_batch":"8","workers":[]})"),
            "global_batch: must be an integer, got string");
  EXPECT_EQ(err(R"({"global_batch":8.5,"workers":[]})"), "global_batch: must be an integer, got 8.5");
  EXPECT_EQ(err(R"({"global_batch":8})"), "workers: required field is missing");
  EXPECT_EQ(err(R"({"global_batch":8,"workers":{}})"), "workers: must be an array, got object");
  EXPECT_EQ(err(R"({"global_batch":8,"workers":[3]})"), "workers[0]: must be an object, got integer");
  EXPECT_EQ(err(R"({"global_batch":8,"workers":[{"alpha":1,"beta":0},{"alpha":"x","beta":0}]})"),
            "workers[1].alpha: must be a number, got string");
  EXPECT_EQ(err(R"({"global_batch":8,"workers":[{"alpha":1}]})"),
            "workers[0].beta: required field is missing");
  EXPECT_EQ(err(R"({"global_batch":8,"workers":[{"alpha":1,"beta":0,"gamma":2}]})"),
            "workers[0].gamma: unknown field");
  EXPECT_EQ(err(R"({"global_batch":8,"workers":[],"extra":1})"), "extra: unknown field");
  EXPECT_EQ(err(R"({"global_batch":1,"min_batch":2,"workers":[{"alpha":1,"beta":0}]})"),
            "global_batch: must be >= min_batch * workers (= 2), got 1");
}

TEST(FitLinear, RecoversAlphaAndBetaFromNoisySamples) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0.0, 0.002);
  std::vector<std::pair<double, double>> samples;
  for (int rep = 0; rep < 20; ++rep) {
    for (double b : {16.0, 32.0, 64.0, 128.0, 256.0}) {
      samples.emplace_back(b, 0.0015 * b + 0.04 + noise(rng));
    }
  }
  auto m = FitLinear(samples);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_NEAR(m->alpha, 0.0015, 0.00005);
  EXPECT_NEAR(m->beta, 0.04, 0.002);
}

TEST(FitLinear, RejectsTooFewDistinctBatchSizesAndBadSamples) {
  EXPECT_EQ(FitLinear({{32, 0.1}}).status().message(), "batch_and_seconds: need >= 2 samples, got 1");
  EXPECT_EQ(FitLinear({{32, 0.1}, {32, 0.12}}).status().message(),
            "batch_and_seconds: need samples at >= 2 distinct batch sizes, got 1");
  EXPECT_EQ(FitLinear({{32, 0.1}, {0, 0.12}}).status().message(),
            "batch_and_seconds[1].batch: must be a finite number > 0, got 0");
  EXPECT_EQ(FitLinear({{32, -0.1}, {64, 0.12}}).status().message(),
            "batch_and_seconds[0].seconds: must be a finite number >= 0, got -0.1");
}

TEST(FitLinear, ClampsNegativeSlopeAndNegativeIntercept) {
  auto flat = FitLinear({{10, 0.5}, {20, 0.4}, {30, 0.3}});  // slope -0.01
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->alpha, 0.0);
  EXPECT_NEAR(flat->beta, 0.4, 1e-12);

  auto steep = FitLinear({{10, 0.0}, {20, 1.0}, {30, 2.0}});  // 0.1 b - 1
  ASSERT_TRUE(steep.ok());
  EXPECT_EQ(steep->beta, 0.0);
  EXPECT_NEAR(steep->alpha, (20.0 * 1 + 30.0 * 2) / (100.0 + 400 + 900), 1e-12);
}

TEST(GradientWeights, WeightedWorkerMeansEqualGlobalBatchMean) {
  // Per-sample 2-d gradients on three workers with batches 1, 2 and 3.
  std::vector<std::vector<std::array<double, 2>>> samples = {
      {{1.0, -2.0}},
      {{0.5, 4.0}, {3.0, 1.0}},
      {{-1.0, 0.0}, {2.0, 2.0}, {6.0, -3.0}}};
  std::vector<int64_t> batches;
  std::vector<std::array<double, 2>> worker_mean;
  std::array<double, 2> global{0, 0};
  double count = 0;
  for (const auto& w : samples) {
    batches.push_back(static_cast<int64_t>(w.size()));
    std::array<double, 2> m{0, 0};
    for (const auto& g : w) {
      for (int d = 0; d < 2; ++d) m[d] += g[d] / static_cast<double>(w.size()), global[d] += g[d];
      count += 1;
    }
    worker_mean.push_back(m);
  }
  std::vector<double> w = GradientWeights(batches);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NEAR(w[0] + w[1] + w[2], 1.0, 1e-15);
  for (int d = 0; d < 2; ++d) {
    double weighted = 0;
    for (size_t i = 0; i < 3; ++i) weighted += w[i] * worker_mean[i][d];
    EXPECT_NEAR(weighted, global[d] / count, 1e-12);
  }
  EXPECT_TRUE(GradientWeights({}).empty());
  EXPECT_EQ(GradientWeights({0, 0}), (std::vector<double>{0, 0}));
}

}  // namespace
}  // namespace star::batch
