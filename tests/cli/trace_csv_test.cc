#include "trace_csv.h"

#include <sstream>

#include <gtest/gtest.h>

namespace star::cli {
namespace {

StatusOr<std::vector<detect::Sample>> Parse(const std::string& text) {
  std::istringstream in(text);
  return ParseTraceCsv(in, "t.csv");
}

TEST(TraceCsv, ReadsRowsWithHeaderInAnyColumnOrder) {
  auto s = Parse(
      "worker,iteration,communication_seconds,compute_seconds,wait_seconds\n"
      "1,0,0.02,0.1,0\n"
      "# a comment\n"
      "\n"
      "0,1,0.03,0.2,0\n");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].worker, 1);
  EXPECT_EQ((*s)[0].iteration, 0);
  EXPECT_DOUBLE_EQ((*s)[0].compute_seconds, 0.1);
  EXPECT_DOUBLE_EQ((*s)[0].communication_seconds, 0.02);
  EXPECT_EQ((*s)[1].worker, 0);
  EXPECT_DOUBLE_EQ((*s)[1].compute_seconds, 0.2);
}

TEST(TraceCsv, ReadsRowsWithoutHeaderInContractOrder) {
  auto s = Parse("3,2,0.5,0.25\r\n");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].iteration, 3);
  EXPECT_EQ((*s)[0].worker, 2);
  EXPECT_DOUBLE_EQ((*s)[0].compute_seconds, 0.5);
  EXPECT_DOUBLE_EQ((*s)[0].communication_seconds, 0.25);
}

TEST(TraceCsv, ErrorsNameLineAndColumn) {
  const std::string header = "iteration,worker,compute_seconds,communication_seconds\n";
  EXPECT_EQ(Parse(header + "0,0,abc,0.1\n").status().message(),
            "t.csv:2: compute_seconds: must be a non-negative number, got \"abc\"");
  EXPECT_EQ(Parse(header + "0,0,0.1,-1\n").status().message(),
            "t.csv:2: communication_seconds: must be a non-negative number, got \"-1\"");
  EXPECT_EQ(Parse(header + "0,x,0.1,0.1\n").status().message(),
            "t.csv:2: worker: must be an integer in [0, 1000000], got \"x\"");
  EXPECT_EQ(Parse(header + "1.5,0,0.1,0.1\n").status().message(),
            "t.csv:2: iteration: must be a non-negative integer, got \"1.5\"");
  EXPECT_EQ(Parse(header + "0,0,0.1\n").status().message(), "t.csv:2: expected 4 columns, got 3");
  EXPECT_EQ(Parse("iteration,worker,compute\n").status().message(),
            "t.csv:1: header: missing column \"compute_seconds\" (expected "
            "iteration,worker,compute_seconds,communication_seconds)");
  EXPECT_EQ(Parse(header + "5,0,0.1,0.1\n4,0,0.1,0.1\n").status().message(),
            "t.csv:3: iteration: went backwards for worker 0 (4 after 5)");
  EXPECT_EQ(Parse(header).status().message(), "t.csv: no trace rows");
  EXPECT_EQ(Parse(header + "0,0,nan,0.1\n").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace star::cli
