#include "star/shim/torch_stage.h"

#include <exception>
#include <string>

#include <torch/torch.h>

namespace star::shim {
namespace {

// The tensor's values as a flat float32 vector.
std::vector<float> Flat(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kFloat32).contiguous().cpu();
  const float* p = c.data_ptr<float>();
  return std::vector<float>(p, p + c.numel());
}

// A copy of `data` shaped `shape` (float32).
torch::Tensor FromFlat(std::span<const float> data, torch::IntArrayRef shape) {
  return torch::from_blob(const_cast<float*>(data.data()), {static_cast<int64_t>(data.size())}, torch::kFloat32)
      .clone()
      .reshape(shape);
}

template <typename F>
Status Guard(const char* what, int micro, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status::Internal(std::string("pipeline stage: ") + what + " of micro-batch " + std::to_string(micro) +
                            ": " + e.what());
  }
}

}  // namespace

TorchStage::TorchStage(torch::nn::Sequential module, const PipelineShape& shape, std::vector<int64_t> input_shape,
                       Source source, Loss loss)
    : module_(std::move(module)),
      shape_(shape),
      input_shape_(std::move(input_shape)),
      source_(std::move(source)),
      loss_(std::move(loss)) {}

StageFunctions TorchStage::Functions() {
  StageFunctions f;
  f.forward = [this](int micro, std::span<const float> in, std::vector<float>& out) {
    return Forward(micro, in, out);
  };
  f.backward = [this](int micro, std::span<const float> grad, std::vector<float>& grad_in) {
    return Backward(micro, grad, grad_in);
  };
  return f;
}

Status TorchStage::Forward(int micro, std::span<const float> input, std::vector<float>& output) {
  Held h;
  if (shape_.stage == 0) {
    STAR_ASSIGN_OR_RETURN(h.input, source_(micro));
  } else if (input.size() != shape_.input_floats) {
    return Status::Internal("pipeline stage: micro-batch " + std::to_string(micro) + " brought " +
                            std::to_string(input.size()) + " floats, not " + std::to_string(shape_.input_floats));
  }
  return Guard("forward", micro, [&]() -> Status {
    if (shape_.stage > 0) h.input = FromFlat(input, input_shape_).requires_grad_(true);
    torch::Tensor y = module_->forward(h.input);
    if (shape_.stage == shape_.stages - 1) {
      STAR_ASSIGN_OR_RETURN(torch::Tensor loss, loss_(micro, y));
      h.output = loss / static_cast<double>(shape_.micro_batches);
      loss_sum_ += h.output.item<double>();
    } else {
      h.output = y;
      output = Flat(y);
    }
    held_[micro] = std::move(h);
    return Status::Ok();
  });
}

Status TorchStage::Backward(int micro, std::span<const float> grad_output, std::vector<float>& grad_input) {
  auto found = held_.find(micro);
  if (found == held_.end()) {
    return Status::Internal("pipeline stage: the backward of micro-batch " + std::to_string(micro) +
                            " before its forward");
  }
  Held h = std::move(found->second);
  held_.erase(found);
  return Guard("backward", micro, [&]() -> Status {
    if (shape_.stage == shape_.stages - 1) {
      h.output.backward();
    } else {
      h.output.backward(FromFlat(grad_output, h.output.sizes()));
    }
    if (shape_.stage > 0) grad_input = Flat(h.input.grad());
    return Status::Ok();
  });
}

}  // namespace star::shim
