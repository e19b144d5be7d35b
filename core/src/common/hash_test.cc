#include "star/core/common/hash.h"

#include <gtest/gtest.h>

namespace star {
namespace {

// Reference values from the FNV specification's test suite (draft-eastlake-fnv).
TEST(Fnv1a32, MatchesTheReferenceValues) {
  EXPECT_EQ(Fnv1a32(""), 0x811c9dc5u);
  EXPECT_EQ(Fnv1a32("a"), 0xe40c292cu);
  EXPECT_EQ(Fnv1a32("foobar"), 0xbf9cf968u);
}

TEST(Fnv1a64, MatchesTheReferenceValues) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(Fnv1a32, HashesBytesAboveSevenBitsAsUnsigned) {
  // A signed char would sign-extend 0xff and give a different value.
  EXPECT_EQ(Fnv1a32(std::string_view("\xff", 1)), (2166136261u ^ 0xffu) * 16777619u);
}

}  // namespace
}  // namespace star
