// One worker's training step on LibTorch, split at the gradient exchange:
//   ComputeGradientSum (local forward/backward)  ->  SyncEngine::Step (exchange in the
//   current mode and the SGD update from the summed gradient and the summed batch)
// Gradients are SUMS over samples (loss reduction 'sum'), so workers with different local
// batches combine by plain addition and the update divides by the global batch: the
// weighted average that batch re-balancing needs. Nothing here throws.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "star/core/status.h"
#include "star/shim/torch_amp.h"
#include "star/shim/torch_data.h"
#include "star/shim/torch_model.h"

namespace star::shim {

struct LocalGradient {
  double mean_loss = 0;        // cross-entropy averaged over the batch (for logging)
  int64_t batch = 0;           // samples in the batch
  double compute_seconds = 0;  // forward + backward + copy into the flat buffer
};

// Forward (under `amp`'s scope), float32 cross-entropy with reduction 'sum', backward,
// and the gradient sum over the batch copied into `grad_sum` (size ParameterCount).
// The module's gradients are zeroed first. When amp.needs_loss_scaling() the loss is
// multiplied by `loss_scale` (the caller unscales). Internal on a LibTorch error.
[[nodiscard]] StatusOr<LocalGradient> ComputeGradientSum(FashionCnn& model, const Batch& batch,
                                                         const AmpSwitch& amp,
                                                         std::span<float> grad_sum,
                                                         double loss_scale = 1.0);

// Top-1 accuracy in [0, 1] on the first `limit` samples (all if limit < 0), float32,
// no autograd, in chunks of 1000. Internal on a LibTorch error.
[[nodiscard]] StatusOr<double> Evaluate(FashionCnn& model, const ImageDataset& data,
                                        int64_t limit = -1);

}  // namespace star::shim
