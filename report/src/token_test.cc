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

TEST(TokensEqualTest, OnlyTheSameBytesAreEqual) {
  const std::string token = RandomToken();
  EXPECT_TRUE(TokensEqual(token, token));
  EXPECT_TRUE(TokensEqual("", ""));
  std::string last_differs = token;
  last_differs.back() = last_differs.back() == '0' ? '1' : '0';
  EXPECT_FALSE(TokensEqual(last_differs, token));
  EXPECT_FALSE(TokensEqual(token.substr(0, 31), token)) << "a prefix is not the token";
  EXPECT_FALSE(TokensEqual(token + "0", token)) << "nor is a longer string that starts with it";
  EXPECT_FALSE(TokensEqual("", token));
  EXPECT_FALSE(TokensEqual(std::string("ab\0c", 4), std::string("ab\0d", 4))) << "bytes after a NUL count";
}

}  // namespace
}  // namespace star::report
