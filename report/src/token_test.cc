#include "star/report/token.h"

#include <gtest/gtest.h>

namespace star::report {
namespace {

TEST(RandomTokenTest, Is32HexDigitsAndDiffersEachCall) {
  const std::string a = RandomToken();
  const std::string b = RandomToken();
  ASSERT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace star::report
