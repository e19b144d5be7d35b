// Test support for the engines' tests: ranks as threads, and a small least-squares problem.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "star/core/api/decision.h"
#include "star/shim/local_collective.h"

namespace star::shim::testing_support {

// Runs fn(rank, communicator) on n threads over NewLocalGroup; returns each rank's status.
inline std::vector<Status> RunRanks(
    int n, std::chrono::milliseconds timeout,
    const std::function<Status(int, std::unique_ptr<Collective>)>& fn) {
  auto comms = NewLocalGroup(n, timeout);
  std::vector<Status> result(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      result[static_cast<size_t>(r)] = fn(r, std::move(comms[static_cast<size_t>(r)]));
    });
  }
  for (auto& t : threads) t.join();
  return result;
}

inline void ExpectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  }
}

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

// A decision of `mode` taking effect at iteration `at`.
inline api::Decision MakeDecision(int64_t epoch, int64_t at, api::SyncMode mode, int k,
                           std::vector<std::vector<int>> groups = {}) {
  api::Decision d;
  d.epoch = epoch;
  d.apply_at_iteration = at;
  d.mode = mode;
  d.k = k;
  d.groups = std::move(groups);
  return d;
}

}  // namespace star::shim::testing_support
