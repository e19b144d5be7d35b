#include "star/core/detect/links.h"

#include <gtest/gtest.h>

namespace star::detect {
namespace {

// A ring 0 -> 1 -> ... -> n-1 -> 0 whose links take `per_byte[s]` seconds per byte out of
// sender s, `rounds` readings each.
void FeedRing(LinkTable& t, const std::vector<double>& per_byte, int rounds = 3) {
  const int n = static_cast<int>(per_byte.size());
  for (int round = 0; round < rounds; ++round) {
    for (int r = 0; r < n; ++r) {
      const int s = (r + n - 1) % n;
      t.Observe(r, api::LinkReading{s, per_byte[static_cast<size_t>(s)] * 1000, 1000});
    }
  }
}

TEST(LinkTable, ACleanRingNamesNobodyAndKeepsEveryShare) {
  LinkTable t(6);
  FeedRing(t, {1.0, 1.2, 0.9, 1.1, 1.3, 1.0});
  EXPECT_TRUE(t.Named().empty());
  for (int w = 0; w < 6; ++w) EXPECT_EQ(t.OwnShare(w), 1.0) << w;
}

TEST(LinkTable, ASlowEgressNamesItsSender) {
  LinkTable t(4);
  FeedRing(t, {1, 1, 5, 1});  // 2 -> 3 is slow
  EXPECT_EQ(t.Named(), std::vector<int>{2});
  EXPECT_DOUBLE_EQ(t.Slowdown(3), 5.0);
  EXPECT_EQ(t.OwnShare(2), 1.0);
  EXPECT_DOUBLE_EQ(t.OwnShare(0), 0.2);  // the typical link over the slowest
}

TEST(LinkTable, AWorkerSlowBothWaysIsNamedNotItsNeighbours) {
  LinkTable t(5);
  // Worker 2's uplink shaped both ways: 1 -> 2 and 2 -> 3 are slow.
  const int n = 5;
  for (int round = 0; round < 3; ++round) {
    for (int r = 0; r < n; ++r) {
      const int s = (r + n - 1) % n;
      const bool slow = r == 2 || s == 2;
      t.Observe(r, api::LinkReading{s, slow ? 4.0 : 1.0, 1});
    }
  }
  EXPECT_EQ(t.Named(), std::vector<int>{2});
}

// Regression: in a 4-ring a worker slow both ways slows half the links; against the
// median of all links (1.75 here) a 2.5x link was not slow, and on the testbed the
// worker behind a 200 Mbit/s link was flagged late or never.
TEST(LinkTable, AWorkerSlowBothWaysInAFourRingIsNamed) {
  LinkTable t(4);
  FeedRing(t, {1, 2.5, 2.5, 1});  // 1 -> 2 and 2 -> 3 slow
  EXPECT_EQ(t.Named(), std::vector<int>{2});
  EXPECT_DOUBLE_EQ(t.Slowdown(2), 2.5);
  EXPECT_DOUBLE_EQ(t.OwnShare(0), 0.4);  // the typical link over the slowest
}

// Behind worker 2's 200 Mbit/s link (40 ns/byte both ways), worker 3's link out is timed
// at 1-5 ns/byte against 0.5 for the clean one: its sends wait on its receives. Worker 3
// is not named for it.
TEST(LinkTable, ALinkPacedByTheSlowLinkIntoItsSenderNamesNobody) {
  LinkTable t(4);
  FeedRing(t, {0.5, 40, 40, 5});
  EXPECT_EQ(t.Named(), std::vector<int>{2});
  LinkTable egress(4);
  FeedRing(egress, {1, 1, 5, 2});  // 2 -> 3 slow; 3 -> 0 paced by it
  EXPECT_EQ(egress.Named(), std::vector<int>{2});
  // A co-located sender on worker 2's 1 Gbit/s uplink (8 ns/byte): 2 -> 3 at 35, and
  // 3 -> 0, paced by it, timed at up to 22.
  LinkTable sender(4);
  FeedRing(sender, {8, 8, 35, 22});
  EXPECT_EQ(sender.Named(), std::vector<int>{2});
}

TEST(LinkTable, OneSlowReadingIsNotASlowLink) {
  LinkTable t(4);
  FeedRing(t, {1, 1, 1, 1}, 2);
  t.Observe(3, api::LinkReading{2, 9.0, 1});  // one hiccup among three readings
  EXPECT_TRUE(t.Named().empty());
  t.Observe(3, api::LinkReading{2, 9.0, 1});  // a second: the median moves
  EXPECT_EQ(t.Named(), std::vector<int>{2});
}

TEST(LinkTable, ANamedWorkersLinkIsStrongEvidenceOnlyWellAboveTheTypicalTwiceRunning) {
  LinkTable t(4);
  FeedRing(t, {1, 1, 5, 1});  // 2 -> 3 five times the typical link
  EXPECT_DOUBLE_EQ(t.StrongSlowdown(2), 5.0);
  EXPECT_EQ(t.StrongSlowdown(3), 0.0) << "not named";
  LinkTable mild(4);
  FeedRing(mild, {1, 1, 2, 1});  // slow (named) but under strong_ratio
  ASSERT_EQ(mild.Named(), std::vector<int>{2});
  EXPECT_EQ(mild.StrongSlowdown(2), 0.0);
  EXPECT_EQ(mild.StrongSlowdown(2, /*recurrence=*/true), 0.0) << "under recurrence_ratio too";
  LinkTable back(4);
  FeedRing(back, {1, 1, 3, 1});  // between recurrence_ratio and strong_ratio
  EXPECT_EQ(back.StrongSlowdown(2), 0.0);
  EXPECT_DOUBLE_EQ(back.StrongSlowdown(2, /*recurrence=*/true), 3.0);
  LinkTable once(4);
  FeedRing(once, {1, 1, 1, 1}, 1);
  once.Observe(3, api::LinkReading{2, 9.0, 1});  // its only reading since: one may be a hiccup
  ASSERT_EQ(once.Named(), std::vector<int>{2});
  EXPECT_EQ(once.StrongSlowdown(2), 0.0);
  once.Observe(3, api::LinkReading{2, 9.0, 1});
  EXPECT_DOUBLE_EQ(once.StrongSlowdown(2), 9.0) << "the median of 1, 9, 9 over 1";
  once.Observe(3, api::LinkReading{2, 1.0, 1});  // the newest is fast again
  EXPECT_EQ(once.StrongSlowdown(2), 0.0);
}

TEST(LinkTable, ANewRingStartsALinksHistoryAfresh) {
  LinkTable t(4);
  FeedRing(t, {1, 1, 6, 1});
  ASSERT_EQ(t.Named(), std::vector<int>{2});
  // Receiver 3 now hears from 1 (another ring order): 2's old readings are gone.
  t.Observe(3, api::LinkReading{1, 1.0, 1});
  EXPECT_TRUE(t.Named().empty());
}

TEST(LinkTable, TwoLinksOrBadReadingsNameNobody) {
  LinkTable two(2);
  FeedRing(two, {1, 9});
  EXPECT_TRUE(two.Named().empty());  // fewer than 3 links: no median to compare with
  LinkTable t(3);
  t.Observe(0, api::LinkReading{0, 1, 1});   // from itself
  t.Observe(0, api::LinkReading{7, 1, 1});   // no such worker
  t.Observe(5, api::LinkReading{1, 1, 1});   // no such receiver
  t.Observe(1, api::LinkReading{0, 1, 0});   // no bytes
  t.Observe(1, api::LinkReading{0, -1, 1});  // negative time
  EXPECT_EQ(t.Slowdown(1), 1.0);
  EXPECT_TRUE(t.Named().empty());
}

}  // namespace
}  // namespace star::detect
