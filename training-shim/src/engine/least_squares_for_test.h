// Test support: a small least-squares problem for the engines' tests.
#pragma once

#include <cstddef>
#include <random>
#include <span>
#include <vector>

namespace star::shim::testing_support {

// A least-squares problem y = x . w* + noise, generated with a fixed seed.
struct LeastSquaresProblem {
  static constexpr size_t kDim = 5;
  std::vector<std::vector<float>> x;
  std::vector<float> y;

  explicit LeastSquaresProblem(size_t samples) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const float w_star[kDim] = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f};
    for (size_t i = 0; i < samples; ++i) {
      std::vector<float> xi(kDim);
      float yi = 0;
      for (size_t d = 0; d < kDim; ++d) {
        xi[d] = u(rng);
        yi += xi[d] * w_star[d];
      }
      x.push_back(xi);
      y.push_back(yi + 0.01f * u(rng));
    }
  }
  // Gradient of 0.5 (x.w - y)^2 summed over samples [begin, begin + count).
  std::vector<float> GradSum(std::span<const float> w, size_t begin, size_t count) const {
    std::vector<float> g(kDim, 0.0f);
    for (size_t i = begin; i < begin + count; ++i) {
      float r = -y[i];
      for (size_t d = 0; d < kDim; ++d) r += x[i][d] * w[d];
      for (size_t d = 0; d < kDim; ++d) g[d] += r * x[i][d];
    }
    return g;
  }
  double Loss(std::span<const float> w) const {
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      double r = -y[i];
      for (size_t d = 0; d < kDim; ++d) r += x[i][d] * w[d];
      l += 0.5 * r * r;
    }
    return l / static_cast<double>(y.size());
  }
};

}  // namespace star::shim::testing_support
