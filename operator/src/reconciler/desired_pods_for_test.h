// For the reconciler's tests: the pods DesiredPods makes of a TrainingJob document, with a
// test failure (and no pods) when the document or its pods are refused.
#pragma once

#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "star/core/api/training_job.h"
#include "star/operator/reconciler/job_objects.h"

namespace star::op::testing_util {

inline std::vector<nlohmann::json> DesiredPodsOf(const nlohmann::json& job) {
  auto parsed = api::TrainingJobFromJson(job);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return {};
  auto pods = DesiredPods(job, parsed->spec, {"http://op:8443"});
  EXPECT_TRUE(pods.ok()) << pods.status();
  return pods.ok() ? *pods : std::vector<nlohmann::json>{};
}

}  // namespace star::op::testing_util
