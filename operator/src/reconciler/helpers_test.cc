#include "reconciler/helpers.h"

#include <gtest/gtest.h>

namespace star::op {
namespace {

TEST(RetryableApiError, RetriesWhatCoreCallsTransient) {
  EXPECT_TRUE(RetryableApiError(Status::Unavailable("connection refused")));
  EXPECT_TRUE(RetryableApiError(Status::DeadlineExceeded("timed out")));
  EXPECT_TRUE(RetryableApiError(Status::Aborted("conflict")));
}

TEST(RetryableApiError, RetriesTheApiServersPassingStates) {
  EXPECT_TRUE(RetryableApiError(Status::AlreadyExists("pods \"j-worker-0\" already exists")));
  EXPECT_TRUE(RetryableApiError(Status::Internal("the answer is not a JSON object")));
  EXPECT_TRUE(RetryableApiError(Status::OutOfRange("too old resource version")));
}

TEST(RetryableApiError, DoesNotRetryARefusal) {
  EXPECT_FALSE(RetryableApiError(Status()));
  EXPECT_FALSE(RetryableApiError(Status::InvalidArgument("spec.containers: required")));
  EXPECT_FALSE(RetryableApiError(Status::FailedPrecondition("forbidden")));
  EXPECT_FALSE(RetryableApiError(Status::NotFound("gone")));
}

}  // namespace
}  // namespace star::op
