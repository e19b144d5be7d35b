#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "star/shim/torch_amp.h"
#include "star/shim/torch_model.h"
#include "star/shim/local_collective.h"
#include "star/shim/sync_engine.h"
#include "star/shim/torch_train.h"

namespace star::shim {
namespace {

AmpSwitch CpuAmp(bool on) {
  auto amp = AmpSwitch::Create(AmpOptions{}, on);
  EXPECT_TRUE(amp.ok()) << amp.status();
  return *amp;
}

TEST(AmpSwitch, OnRunsConvAndLinearInBf16OffInFloat32) {
  torch::manual_seed(1);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(1, 4, 3));
  torch::nn::Linear fc(8, 3);
  torch::Tensor img = torch::randn({2, 1, 8, 8});
  torch::Tensor vec = torch::randn({2, 8});
  AmpSwitch amp = CpuAmp(true);
  {
    AmpSwitch::Scope scope(amp);
    EXPECT_EQ(conv->forward(img).scalar_type(), torch::kBFloat16);
    EXPECT_EQ(fc->forward(vec).scalar_type(), torch::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_cpu_enabled());  // restored on scope exit
  EXPECT_EQ(conv->forward(img).scalar_type(), torch::kFloat);

  amp.set_enabled(false);  // per-iteration switch
  {
    AmpSwitch::Scope scope(amp);
    EXPECT_EQ(conv->forward(img).scalar_type(), torch::kFloat);
    EXPECT_EQ(fc->forward(vec).scalar_type(), torch::kFloat);
  }
}

TEST(AmpSwitch, NestedScopeLeavesAnEnclosingAutocastRegionOn) {
  // LibTorch 1.13 accepts only bf16 as the CPU autocast dtype, so the enclosing state
  // differs from the scope's in the enabled flag only.
  struct Reset {
    ~Reset() { at::autocast::set_cpu_enabled(false); }
  } reset;
  at::autocast::set_cpu_enabled(true);
  {
    AmpSwitch::Scope scope(CpuAmp(true));
    EXPECT_TRUE(at::autocast::is_cpu_enabled());
  }
  EXPECT_TRUE(at::autocast::is_cpu_enabled());
  EXPECT_EQ(at::autocast::get_autocast_cpu_dtype(), at::kBFloat16);
}

TEST(AmpSwitch, Fp16OnCpuAndCudaWithoutCudaAreRejected) {
  auto fp16 = AmpSwitch::Create(AmpOptions{AmpDevice::kCpu, AmpDtype::kFloat16}, true);
  EXPECT_EQ(fp16.status().code(), StatusCode::kInvalidArgument);
  if (!torch::cuda::is_available()) {
    auto cuda = AmpSwitch::Create(AmpOptions{AmpDevice::kCuda, AmpDtype::kFloat16}, true);
    EXPECT_EQ(cuda.status().code(), StatusCode::kUnavailable);
  }
}

TEST(AmpSwitch, GradientsStayFloat32AndCloseToFp32UnderAmp) {
  torch::manual_seed(3);
  FashionCnn model;
  Batch batch{torch::randn({8, 1, 28, 28}), torch::randint(0, 10, {8}, torch::kLong)};
  const int64_t n = ParameterCount(*model);
  std::vector<float> g32(n), g16(n);
  auto a = ComputeGradientSum(model, batch, CpuAmp(false), g32);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = ComputeGradientSum(model, batch, CpuAmp(true), g16);
  ASSERT_TRUE(b.ok()) << b.status();
  for (const auto& p : model->parameters()) EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
  EXPECT_EQ(a->batch, 8);
  EXPECT_NEAR(a->mean_loss, b->mean_loss, 0.05 * a->mean_loss);
  double dot = 0, n32 = 0, n16 = 0;
  for (int64_t i = 0; i < n; ++i) {
    dot += double{g32[i]} * g16[i];
    n32 += double{g32[i]} * g32[i];
    n16 += double{g16[i]} * g16[i];
  }
  EXPECT_GT(dot / std::sqrt(n32 * n16), 0.95);  // same direction up to bf16 rounding
  EXPECT_GT(std::fabs(dot / std::sqrt(n32 * n16) - 1.0), 0.0);  // ...but not bit-identical
}

TEST(DynamicLossScaler, BacksOffOnOverflowAndGrowsAfterGoodSteps) {
  DynamicLossScaler scaler(DynamicLossScaler::Options{8.0, 2.0, 0.5, 2});
  std::vector<float> g = {8.0f, -16.0f};
  EXPECT_TRUE(scaler.UnscaleAndUpdate(g));
  EXPECT_EQ(g, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(scaler.scale(), 8.0);
  std::vector<float> bad = {1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_FALSE(scaler.UnscaleAndUpdate(bad));
  EXPECT_EQ(scaler.scale(), 4.0);
  std::vector<float> nan = {std::nanf("")};
  EXPECT_FALSE(scaler.UnscaleAndUpdate(nan));
  EXPECT_EQ(scaler.scale(), 2.0);
  std::vector<float> ok = {1.0f};
  EXPECT_TRUE(scaler.UnscaleAndUpdate(ok));
  EXPECT_TRUE(scaler.UnscaleAndUpdate(ok));
  EXPECT_EQ(scaler.scale(), 4.0);
}

TEST(FlatBuffers, ParameterCountMatchesTheArchitecture) {
  FashionCnn model;
  EXPECT_EQ(ParameterCount(*model), (9 * 32 + 32) + (9 * 32 * 64 + 64) + (3136 * 128 + 128) +
                                        (128 * 10 + 10));
}

TEST(FlatBuffers, ParametersRoundTripThroughAFlatVector) {
  torch::manual_seed(5);
  FashionCnn a, b;
  const int64_t n = ParameterCount(*a);
  std::vector<float> flat(n);
  ASSERT_TRUE(ParametersToFlat(*a, flat).ok());
  ASSERT_TRUE(FlatToParameters(flat, *b).ok());
  auto pa = a->parameters(), pb = b->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << i;
  // A distinct pattern comes back exactly.
  std::vector<float> pattern(n);
  std::iota(pattern.begin(), pattern.end(), -1000.0f);
  ASSERT_TRUE(FlatToParameters(pattern, *b).ok());
  std::vector<float> back(n);
  ASSERT_TRUE(ParametersToFlat(*b, back).ok());
  EXPECT_EQ(back, pattern);
  EXPECT_FLOAT_EQ(b->parameters()[0].flatten()[1].item<float>(), -999.0f);
}

TEST(FlatBuffers, GradientSumIsTheSumOfPerSampleGradients) {
  torch::manual_seed(6);
  FashionCnn model;
  const int64_t n = ParameterCount(*model);
  std::vector<float> none(n, 1.0f);
  ASSERT_TRUE(GradientsToFlat(*model, none).ok());  // no backward yet: zeros
  EXPECT_EQ(none, std::vector<float>(n, 0.0f));

  Batch both{torch::randn({2, 1, 28, 28}), torch::tensor({int64_t{3}, int64_t{7}})};
  std::vector<float> sum(n), g0(n), g1(n);
  ASSERT_TRUE(ComputeGradientSum(model, both, CpuAmp(false), sum).ok());
  Batch first{both.images.narrow(0, 0, 1), both.labels.narrow(0, 0, 1)};
  Batch second{both.images.narrow(0, 1, 1), both.labels.narrow(0, 1, 1)};
  ASSERT_TRUE(ComputeGradientSum(model, first, CpuAmp(false), g0).ok());
  ASSERT_TRUE(ComputeGradientSum(model, second, CpuAmp(false), g1).ok());
  for (int64_t i = 0; i < n; i += 97) EXPECT_NEAR(sum[i], g0[i] + g1[i], 1e-4) << i;
}

TEST(FlatBuffers, SizeMismatchIsRejected) {
  FashionCnn model;
  std::vector<float> small(10);
  EXPECT_EQ(ParametersToFlat(*model, small).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FlatToParameters(small, *model).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(GradientsToFlat(*model, small).code(), StatusCode::kInvalidArgument);
}

// 200 iterations of batch 64 with a fixed seed: a deterministic accuracy floor.
TEST(TrainingSmoke, TwoHundredIterationsReachSeventyPercentOnTwoThousandTestImages) {
  torch::set_num_threads(2);
  torch::manual_seed(7);
  auto train = LoadFashionMnist(kFashionMnistDefaultDir, FashionMnistSplit::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  auto test = LoadFashionMnist(kFashionMnistDefaultDir, FashionMnistSplit::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  auto it = BatchIterator::Create(&*train, ShardRange{0, train->size()}, 7);
  ASSERT_TRUE(it.ok());
  FashionCnn model;
  const int64_t n = ParameterCount(*model);
  std::vector<float> params(n), grad(n);
  ASSERT_TRUE(ParametersToFlat(*model, params).ok());
  auto engine = SyncEngine::Create(std::move(NewLocalGroup(1, std::chrono::seconds(10))[0]),
                                   params, SgdOptions{0.02f, 0.9f, 0.0f});
  ASSERT_TRUE(engine.ok()) << engine.status();
  AmpSwitch amp = CpuAmp(false);
  for (int i = 0; i < 200; ++i) {
    amp.set_enabled(i % 2 == 1);  // exercise the per-iteration switch
    auto batch = it->Next(64);
    ASSERT_TRUE(batch.ok());
    auto g = ComputeGradientSum(model, *batch, amp, grad);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(std::isfinite(g->mean_loss));
    ASSERT_TRUE((*engine)->Step(grad, g->batch).ok());
    ASSERT_TRUE(FlatToParameters((*engine)->params(), *model).ok());
  }
  auto acc = Evaluate(model, *test, 2000);
  ASSERT_TRUE(acc.ok()) << acc.status();
  EXPECT_GT(*acc, 0.70);
}

}  // namespace
}  // namespace star::shim
