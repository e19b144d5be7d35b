// Worker reports for the operator e2e tests (the test plays the workers).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>

#include "star/core/api/decision.h"
#include "star/core/api/worker_report.h"
#include "star/report/client.h"

namespace star::op::e2e {

// What the workers of a job report: `iterations` rounds of every worker 0..workers-1
// from iteration `first_iteration`, compute 0.1 s times lognormal noise (sigma),
// `slow_worker` `slowdown` times slower from iteration `slow_from`; communication
// 0.01 s. Deterministic (seed).
struct StragglerReports {
  std::string job;  // "<namespace>/<name>"
  int workers = 4;
  int iterations = 80;
  int slow_worker = 0;
  int slow_from = 40;
  double slowdown = 4;
  uint64_t seed = 7;
  double sigma = 0.05;
  int first_iteration = 1;
  std::string ca_pem = "";  // the CA an https report endpoint is verified with ("" = system CAs)
  // Sees every report once it has been accepted (e.g. a worker's metrics); may be empty.
  std::function<void(const api::WorkerReport&)> observe = nullptr;
  // The slow worker's extra time is communication (0.01 s times slowdown), not compute.
  bool slow_communication = false;
};

// A report client for `report_url` with `token`; null, with a test failure, when it
// cannot be made.
inline std::unique_ptr<report::ReportClient> NewReportClient(const std::string& report_url, const std::string& token) {
  report::ReportClientOptions co;
  co.base_url = report_url;
  co.token = token;
  auto client = report::ReportClient::Create(co);
  if (!client.ok()) {
    ADD_FAILURE() << client.status();
    return nullptr;
  }
  return std::move(*client);
}

// Worker 0 of `job` ("<namespace>/<name>") at `iteration`: 64 samples, 0.1 s of compute.
inline api::WorkerReport OneReport(const std::string& job, int64_t iteration) {
  api::WorkerReport rep;
  rep.job = job;
  rep.local_batch = 64;
  rep.compute_seconds = 0.1;
  rep.iteration = iteration;
  return rep;
}

// Sends `r` to `report_url` with `token`; *last (if not null) gets the newest decision
// the responses carried.
inline void SendReports(const std::string& report_url, const std::string& token, const StragglerReports& r,
                        std::optional<api::Decision>* last = nullptr) {
  report::ReportClientOptions co;
  co.base_url = report_url;
  co.token = token;
  co.ca_data = r.ca_pem;
  auto client = report::ReportClient::Create(co);
  ASSERT_TRUE(client.ok()) << client.status();
  std::mt19937_64 rng(r.seed);
  std::lognormal_distribution<double> noise(0.0, r.sigma);
  api::WorkerReport rep;
  rep.job = r.job;
  rep.local_batch = 64;
  for (int it = r.first_iteration; it < r.first_iteration + r.iterations; ++it) {
    for (int w = 0; w < r.workers; ++w) {
      rep.worker = w;
      rep.iteration = it;
      rep.time_seconds = it * 0.5;
      const double slowdown = w == r.slow_worker && it >= r.slow_from ? r.slowdown : 1.0;
      rep.compute_seconds = (r.slow_communication ? 0.1 : 0.1 * slowdown) * noise(rng);
      rep.communication_seconds = r.slow_communication ? 0.1 * (slowdown - 1) * noise(rng) + 0.01 : 0.01;
      auto sent = (*client)->Send(rep);
      ASSERT_TRUE(sent.ok()) << sent.status();
      if (last != nullptr && *sent) *last = **sent;
      if (r.observe) r.observe(rep);
    }
  }
}

// Job `job`'s ("<namespace>/<name>") 4 workers report 150 iterations; worker 0 computes
// 3x slower from iteration 30 (with some noise: identical times leave the detector no
// spread to judge by).
inline void SendSlowWorkerZeroReports(const std::string& report_url, const std::string& token, const std::string& job,
                                      std::function<void(const api::WorkerReport&)> observe = nullptr) {
  SendReports(report_url, token, {job, 4, 150, 0, 30, 3.0, 11, 0.03, 1, "", std::move(observe)});
}

// After SendSlowWorkerZeroReports: 100 more iterations in which worker 0 is as fast as
// the others again.
inline void SendWorkerZeroRecoveredReports(const std::string& report_url, const std::string& token,
                                           const std::string& job) {
  SendReports(report_url, token, {job, 4, 100, 0, 1000, 1.0, 12, 0.03, 151});
}

}  // namespace star::op::e2e
