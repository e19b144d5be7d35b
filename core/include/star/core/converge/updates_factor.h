// The gradient-noise-scale convergence model (ALGORITHMS.md section 2).
//
// Training at effective batch b needs I(b) times as many updates as training at an
// infinitely large batch would (McCandlish et al., "An Empirical Model of Large-Batch
// Training"):
//     I(b) = 1 + phi / b,   phi = tr(Sigma) / |G|^2   (the "simple" noise scale).
// The synchronization modes are compared by (time between updates) x I(effective batch).
#pragma once

namespace star::converge {

// Returns I(batch) = 1 + noise_scale / batch.
// Requires batch > 0 and noise_scale >= 0 (both finite); asserts in debug builds.
// The result is >= 1 and non-increasing in batch. O(1).
[[nodiscard]] double UpdatesFactor(double batch, double noise_scale);

}  // namespace star::converge
