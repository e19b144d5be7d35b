// The CNN, the flat-buffer bridge and the local training step: one translation unit,
// since every piece needs the heavy torch::nn headers.
#include <chrono>
#include <cstring>
#include <string>

#include <c10/util/Exception.h>
#include <torch/autograd.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/functional/pooling.h>
#include <torch/utils.h>

#include "star/shim/torch_model.h"
#include "star/shim/torch_train.h"

namespace star::shim {

namespace F = torch::nn::functional;

FashionCnnImpl::FashionCnnImpl() {
  conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)));
  conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
  fc1_ = register_module("fc1", torch::nn::Conv2d(torch::nn::Conv2dOptions(64, 128, 7)));
  fc2_ = register_module("fc2", torch::nn::Conv2d(torch::nn::Conv2dOptions(128, 10, 1)));
}

torch::Tensor FashionCnnImpl::forward(torch::Tensor x) {
  x = F::max_pool2d(torch::relu(conv1_->forward(x)), F::MaxPool2dFuncOptions(2));
  x = F::max_pool2d(torch::relu(conv2_->forward(x)), F::MaxPool2dFuncOptions(2));
  x = torch::relu(fc1_->forward(x));  // (B, 128, 1, 1)
  return fc2_->forward(x).flatten(1);
}

namespace {

// Checks that `flat_size` matches the module and every parameter is contiguous CPU float32.
Status CheckLayout(const torch::nn::Module& module, size_t flat_size, const char* what) {
  int64_t total = 0;
  for (const auto& p : module.parameters()) {
    if (p.scalar_type() != torch::kFloat || !p.device().is_cpu() || !p.is_contiguous()) {
      return Status::InvalidArgument(std::string(what) +
                                     ": every parameter must be contiguous CPU float32");
    }
    total += p.numel();
  }
  if (static_cast<int64_t>(flat_size) != total) {
    return Status::InvalidArgument(std::string(what) + ": flat buffer has " +
                                   std::to_string(flat_size) + " floats, module has " +
                                   std::to_string(total));
  }
  return Status::Ok();
}

}  // namespace

int64_t ParameterCount(const torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters()) total += p.numel();
  return total;
}

std::vector<size_t> TensorSizes(const torch::nn::Module& module) {
  std::vector<size_t> sizes;
  for (const auto& p : module.parameters()) sizes.push_back(static_cast<size_t>(p.numel()));
  return sizes;
}

Status ParametersToFlat(const torch::nn::Module& module, std::span<float> out) {
  STAR_RETURN_IF_ERROR(CheckLayout(module, out.size(), "parameters to flat"));
  size_t off = 0;
  for (const auto& p : module.parameters()) {
    std::memcpy(out.data() + off, p.data_ptr<float>(), p.numel() * sizeof(float));
    off += p.numel();
  }
  return Status::Ok();
}

Status FlatToParameters(std::span<const float> in, torch::nn::Module& module) {
  STAR_RETURN_IF_ERROR(CheckLayout(module, in.size(), "flat to parameters"));
  torch::NoGradGuard no_grad;
  size_t off = 0;
  for (auto& p : module.parameters()) {
    std::memcpy(p.data_ptr<float>(), in.data() + off, p.numel() * sizeof(float));
    off += p.numel();
  }
  return Status::Ok();
}

Status GradientsToFlat(const torch::nn::Module& module, std::span<float> out) {
  STAR_RETURN_IF_ERROR(CheckLayout(module, out.size(), "gradients to flat"));
  size_t off = 0;
  for (const auto& p : module.parameters()) {
    const torch::Tensor& g = p.grad();
    if (!g.defined()) {
      std::memset(out.data() + off, 0, p.numel() * sizeof(float));
    } else {
      torch::Tensor c = g.to(torch::kFloat).contiguous();
      std::memcpy(out.data() + off, c.data_ptr<float>(), p.numel() * sizeof(float));
    }
    off += p.numel();
  }
  return Status::Ok();
}

StatusOr<LocalGradient> ComputeGradientSum(FashionCnn& model, const Batch& batch,
                                           const AmpSwitch& amp, std::span<float> grad_sum,
                                           double loss_scale) {
  auto start = std::chrono::steady_clock::now();
  try {
    model->train();
    model->zero_grad();
    torch::Tensor logits;
    {
      AmpSwitch::Scope scope(amp);
      logits = model->forward(batch.images);
    }
    // The loss is float32 whatever the forward pass ran in.
    torch::Tensor loss = F::cross_entropy(
        logits.to(torch::kFloat), batch.labels,
        F::CrossEntropyFuncOptions().reduction(torch::kSum));
    torch::Tensor to_backward = amp.needs_loss_scaling() ? loss * loss_scale : loss;
    to_backward.backward();
    STAR_RETURN_IF_ERROR(GradientsToFlat(*model, grad_sum));
    LocalGradient out;
    out.batch = batch.size();
    out.mean_loss = loss.item<double>() / static_cast<double>(out.batch);
    out.compute_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("training step: ") + e.what_without_backtrace());
  }
}

// Samples per forward pass. Small enough that the activations stay in the allocator's
// heap: 1000 (a 100 MB first activation, a fresh mmap and page faults each time) took
// 1.55 s per 2000-sample evaluation on one thread here, 50 takes 0.68 s.
constexpr int64_t kEvalChunk = 50;

StatusOr<double> Evaluate(FashionCnn& model, const ImageDataset& data, int64_t limit) {
  int64_t n = limit < 0 ? data.size() : std::min(limit, data.size());
  if (n == 0) return Status::InvalidArgument("evaluate: no samples");
  try {
    torch::NoGradGuard no_grad;
    model->eval();
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i += kEvalChunk) {
      int64_t len = std::min<int64_t>(kEvalChunk, n - i);
      torch::Tensor pred = model->forward(ModelInput(data.images.narrow(0, i, len))).argmax(1);
      correct += pred.eq(data.labels.narrow(0, i, len)).sum().item<int64_t>();
    }
    model->train();
    return static_cast<double>(correct) / static_cast<double>(n);
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("evaluate: ") + e.what_without_backtrace());
  }
}

}  // namespace star::shim
