// TorchStage: a pipeline stage's StageFunctions (pipeline_engine.h) for a slice of a
// torch::nn::Sequential. Each forward keeps its micro-batch's input and output (the
// autograd graph) until that micro-batch's backward, so a stage holds as many graphs as
// its warm-up depth. Parameter gradients accumulate over the iteration's micro-batches
// in the module (zero them before an iteration, step after it). The last stage's loss is
// divided by the micro-batch count, so an iteration's gradients are those of the mean
// of the micro-batches' losses: a whole batch's when the loss is a mean and the
// micro-batches are equal. Nothing here throws: LibTorch errors come back as Internal.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include <torch/nn/modules/container/sequential.h>

#include "star/core/status.h"
#include "star/shim/pipeline_engine.h"

namespace star::shim {

class TorchStage {
 public:
  // The first stage's input of a micro-batch.
  using Source = std::function<StatusOr<torch::Tensor>(int micro)>;
  // The last stage's loss of a micro-batch from its output (a scalar).
  using Loss = std::function<StatusOr<torch::Tensor>(int micro, const torch::Tensor& output)>;

  // `input_shape`: a micro-batch's activation from the previous stage (unused on the
  // first stage, which reads `source`); `loss` is used on the last stage only.
  TorchStage(torch::nn::Sequential module, const PipelineShape& shape, std::vector<int64_t> input_shape,
             Source source, Loss loss);

  StageFunctions Functions();
  // The last stage's summed loss (already divided by M) since the last call; 0 elsewhere.
  double TakeLoss() { return std::exchange(loss_sum_, 0.0); }

 private:
  Status Forward(int micro, std::span<const float> input, std::vector<float>& output);
  Status Backward(int micro, std::span<const float> grad_output, std::vector<float>& grad_input);

  struct Held {
    torch::Tensor input;   // requires grad on stages after the first
    torch::Tensor output;  // the loss on the last stage
  };
  torch::nn::Sequential module_;
  PipelineShape shape_;
  std::vector<int64_t> input_shape_;
  Source source_;
  Loss loss_;
  std::map<int, Held> held_;
  double loss_sum_ = 0;
};

}  // namespace star::shim
