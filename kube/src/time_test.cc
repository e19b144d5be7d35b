// Rfc3339 and NowRfc3339: the metav1.Time format, in UTC, to the second.
#include "star/kube/time.h"

#include <gtest/gtest.h>

#include <regex>

namespace star::kube {
namespace {

using std::chrono::system_clock;

TEST(Rfc3339Test, WritesUtcToTheSecond) {
  EXPECT_EQ(Rfc3339(system_clock::time_point{}), "1970-01-01T00:00:00Z");
  // 2025-01-31T12:34:56Z plus 789 ms: the fraction is dropped.
  const system_clock::time_point t{std::chrono::seconds(1738326896) + std::chrono::milliseconds(789)};
  EXPECT_EQ(Rfc3339(t), "2025-01-31T12:34:56Z");
}

TEST(Rfc3339Test, NowLiesBetweenTheClockReadingsAroundIt) {
  const std::string before = Rfc3339(system_clock::now());
  const std::string now = NowRfc3339();
  const std::string after = Rfc3339(system_clock::now());
  EXPECT_TRUE(std::regex_match(now, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << now;
  // Fixed width: text order is time order.
  EXPECT_LE(before, now);
  EXPECT_LE(now, after);
}

TEST(ParseRfc3339Test, ReadsUtcOffsetsAndFractions) {
  const system_clock::time_point t{std::chrono::seconds(1738326896)};
  EXPECT_EQ(ParseRfc3339("2025-01-31T12:34:56Z"), t);
  EXPECT_EQ(ParseRfc3339("2025-01-31T12:34:56.789Z"), t);
  EXPECT_EQ(ParseRfc3339("2025-01-31T14:34:56+02:00"), t);
  EXPECT_EQ(ParseRfc3339("2025-01-31T11:04:56-01:30"), t);
  EXPECT_EQ(ParseRfc3339(Rfc3339(t)), t);
}

TEST(ParseRfc3339Test, RefusesWhatIsNotATimestamp) {
  for (const char* bad : {"", "2025-01-31", "2025-01-31 12:34:56Z", "2025-01-31T12:34:56", "2025-01-31T12:34:56Q",
                          "2025-01-31T12:34:56.Z", "2025-01-31T12:34:56+2:00", "2025-13-31T12:34:56Z",
                          "2025-01-31T12:34:56Z trailing", "2025-01-31T12:34:56+25:00"}) {
    EXPECT_FALSE(ParseRfc3339(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace star::kube
