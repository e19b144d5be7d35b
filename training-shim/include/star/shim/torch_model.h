// The Fashion-MNIST CNN and the bridge between a module and flat float32 buffers (what
// the collectives move).
//
// Flat layout: module.parameters() in registration order, each tensor row-major,
// concatenated. Every worker builds the same architecture, so the layout is the same on
// every rank.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "star/core/status.h"

namespace star::shim {

// conv(1->32, 3x3) - relu - maxpool2 - conv(32->64, 3x3) - relu - maxpool2 -
// fc(3136->128) - relu - fc(128->10). Input (B, 1, 28, 28) float32; output logits (B, 10)
// (bf16 under CPU autocast). 421,642 parameters; no buffers, no dropout.
// The two fully connected layers are written as convolutions (7x7 over the 7x7 map, then
// 1x1): the same function and parameter count as Linear, but fp32 then runs on oneDNN
// instead of the reference BLAS that Debian's LibTorch links (about 3x faster here).
class FashionCnnImpl : public torch::nn::Module {
 public:
  FashionCnnImpl();
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(FashionCnn);

// Number of float elements of all parameters.
int64_t ParameterCount(const torch::nn::Module& module);
// Element counts of the parameters in order (a parameter-server job shards by them).
std::vector<size_t> TensorSizes(const torch::nn::Module& module);

// Copies the parameters into `out` (size ParameterCount). InvalidArgument on a size
// mismatch or a parameter that is not float32 on CPU.
[[nodiscard]] Status ParametersToFlat(const torch::nn::Module& module, std::span<float> out);
// Copies `in` into the parameters (no autograd history). Same errors.
[[nodiscard]] Status FlatToParameters(std::span<const float> in, torch::nn::Module& module);
// Copies the gradients into `out`; a parameter without a gradient contributes zeros.
// Same errors.
[[nodiscard]] Status GradientsToFlat(const torch::nn::Module& module, std::span<float> out);

}  // namespace star::shim
