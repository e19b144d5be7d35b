#include "star/core/status.h"

#include <gtest/gtest.h>

namespace star {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("x: must be even, got " + std::to_string(x));
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  STAR_ASSIGN_OR_RETURN(int h, Half(x));
  STAR_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(Status, NamedConstructorsCarryCodeAndMessage) {
  Status s = Status::InvalidArgument("spec.workers.replicas: must be >= 1, got 0");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: spec.workers.replicas: must be >= 1, got 0");
  EXPECT_EQ(Status::DeadlineExceeded("x").code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Status::Unavailable("x").code(), StatusCode::kUnavailable);
}

TEST(Status, WithPrefixAddsContextAndKeepsCode) {
  Status s = Status::NotFound("no such file").WithPrefix("trace.csv");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "trace.csv: no such file");
  EXPECT_TRUE(Status().WithPrefix("x").ok());
}

TEST(Status, IsTransientOnlyForCodesARetryCanCure) {
  EXPECT_TRUE(IsTransient(Status::Unavailable("connection refused")));
  EXPECT_TRUE(IsTransient(Status::DeadlineExceeded("timed out")));
  EXPECT_TRUE(IsTransient(Status::Aborted("conflict")));
  EXPECT_FALSE(IsTransient(Status()));
  EXPECT_FALSE(IsTransient(Status::InvalidArgument("spec.x: bad")));
  EXPECT_FALSE(IsTransient(Status::NotFound("gone")));
  EXPECT_FALSE(IsTransient(Status::AlreadyExists("x")));
  EXPECT_FALSE(IsTransient(Status::FailedPrecondition("forbidden")));
  EXPECT_FALSE(IsTransient(Status::OutOfRange("410")));
  EXPECT_FALSE(IsTransient(Status::Internal("bug")));
  EXPECT_FALSE(IsTransient(Status::Unimplemented("x")));
}

TEST(StatusOr, AssignOrReturnPropagatesFirstError) {
  auto ok = Quarter(8);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 2);
  auto bad = Quarter(6);  // 6/2 = 3 is odd
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "x: must be even, got 3");
}

}  // namespace
}  // namespace star
