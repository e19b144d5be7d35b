// AmpSwitch on a CUDA device: fp16 autocast with the DynamicLossScaler, and bf16.
// Skipped where LibTorch sees no CUDA device (Debian's LibTorch has no CUDA at all).
#include <gtest/gtest.h>

#include <span>

#include <torch/torch.h>

#include "star/shim/torch_amp.h"

namespace star::shim {
namespace {

class AmpSwitchCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: the CUDA AMP path is not exercised";
    torch::manual_seed(3);
    fc_ = torch::nn::Linear(64, 32);
    fc_->to(torch::kCUDA);
    x_ = torch::randn({16, 64}, torch::TensorOptions().device(torch::kCUDA));
  }

  AmpSwitch Amp(AmpDtype dtype) {
    auto amp = AmpSwitch::Create(AmpOptions{AmpDevice::kCuda, dtype}, true);
    EXPECT_TRUE(amp.ok()) << amp.status();
    return *amp;
  }

  // The weight's gradient of mean(fc(x)^2) * scale, on the host; the forward pass under
  // `amp` when given.
  torch::Tensor WeightGradient(const AmpSwitch* amp, double scale, torch::ScalarType* out_dtype) {
    fc_->zero_grad();
    torch::Tensor out;
    if (amp != nullptr) {
      AmpSwitch::Scope scope(*amp);
      out = fc_(x_);
    } else {
      out = fc_(x_);
    }
    *out_dtype = out.scalar_type();
    (out.to(torch::kFloat).pow(2).mean() * scale).backward();
    return fc_->weight.grad().to(torch::kCPU).contiguous();
  }

  torch::nn::Linear fc_{nullptr};
  torch::Tensor x_;
};

TEST_F(AmpSwitchCuda, Fp16WithLossScalingGivesTheFloat32Gradient) {
  torch::ScalarType dtype;
  torch::Tensor reference = WeightGradient(nullptr, 1.0, &dtype);
  EXPECT_EQ(dtype, torch::kFloat);
  AmpSwitch amp = Amp(AmpDtype::kFloat16);
  ASSERT_TRUE(amp.needs_loss_scaling());
  DynamicLossScaler scaler;
  torch::Tensor grad = WeightGradient(&amp, scaler.scale(), &dtype);
  EXPECT_EQ(dtype, torch::kHalf);
  ASSERT_EQ(grad.scalar_type(), torch::kFloat) << "parameters and gradients stay float32";
  ASSERT_TRUE(scaler.UnscaleAndUpdate(std::span<float>(grad.data_ptr<float>(), grad.numel())));
  EXPECT_TRUE(torch::allclose(grad, reference, 1e-2, 1e-3)) << (grad - reference).abs().max();
  EXPECT_EQ(fc_(x_).scalar_type(), torch::kFloat) << "the scope turns autocast off again";
}

TEST_F(AmpSwitchCuda, AnFp16OverflowSkipsTheStepAndHalvesTheScale) {
  AmpSwitch amp = Amp(AmpDtype::kFloat16);
  DynamicLossScaler scaler(DynamicLossScaler::Options{.initial_scale = 1e30});
  torch::ScalarType dtype;
  torch::Tensor grad = WeightGradient(&amp, scaler.scale(), &dtype);
  EXPECT_FALSE(scaler.UnscaleAndUpdate(std::span<float>(grad.data_ptr<float>(), grad.numel())))
      << "a gradient past fp16's range is inf";
  EXPECT_EQ(scaler.scale(), 0.5e30);
}

TEST_F(AmpSwitchCuda, Bf16NeedsNoScalingAndStaysClose) {
  torch::ScalarType dtype;
  torch::Tensor reference = WeightGradient(nullptr, 1.0, &dtype);
  AmpSwitch amp = Amp(AmpDtype::kBFloat16);
  EXPECT_FALSE(amp.needs_loss_scaling());
  torch::Tensor grad = WeightGradient(&amp, 1.0, &dtype);
  EXPECT_EQ(dtype, torch::kBFloat16);
  EXPECT_TRUE(torch::allclose(grad, reference, 5e-2, 1e-2)) << (grad - reference).abs().max();
}

TEST_F(AmpSwitchCuda, AnOffSwitchLeavesTheForwardPassInFloat32) {
  auto off = AmpSwitch::Create(AmpOptions{AmpDevice::kCuda, AmpDtype::kFloat16}, false);
  ASSERT_TRUE(off.ok()) << off.status();
  torch::ScalarType dtype;
  WeightGradient(&*off, 1.0, &dtype);
  EXPECT_EQ(dtype, torch::kFloat);
}

}  // namespace
}  // namespace star::shim
