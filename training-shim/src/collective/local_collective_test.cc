// LocalCollective: every operation at world sizes 1..8, ranks as threads.
#include "star/shim/local_collective.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <thread>

namespace star::shim {
namespace {

using std::chrono::milliseconds;

void RunGroup(std::vector<std::unique_ptr<Collective>>& group,
              const std::function<void(Collective&)>& body) {
  std::vector<std::thread> threads;
  for (auto& c : group) threads.emplace_back([&body, &c] { body(*c); });
  for (auto& t : threads) t.join();
}

class LocalCollectiveTest : public ::testing::TestWithParam<int> {
 protected:
  int n() const { return GetParam(); }
  std::vector<std::unique_ptr<Collective>> group_ = NewLocalGroup(GetParam(), milliseconds(10000));
};

TEST_P(LocalCollectiveTest, AllReduceSumGivesExactSums) {
  RunGroup(group_, [&](Collective& c) {
    EXPECT_EQ(c.size(), n());
    std::vector<float> data(1000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((c.rank() + 1) * i);
    ASSERT_TRUE(c.AllReduceSum(data.data(), data.size()).ok());
    for (size_t i = 0; i < data.size(); ++i) {
      ASSERT_EQ(data[i], static_cast<float>(n() * (n() + 1) / 2 * i)) << i;
    }
    // Back to back, the second one sees the first's result.
    ASSERT_TRUE(c.AllReduceSum(data.data(), data.size()).ok());
    EXPECT_EQ(data[1], static_cast<float>(n() * n() * (n() + 1) / 2));
  });
}

TEST_P(LocalCollectiveTest, BroadcastCopiesRootsData) {
  for (int root = 0; root < n(); ++root) {
    RunGroup(group_, [&](Collective& c) {
      std::vector<float> data(64, c.rank() == root ? 7.0f : -1.0f);
      ASSERT_TRUE(c.Broadcast(data.data(), data.size(), root).ok());
      EXPECT_EQ(data, std::vector<float>(64, 7.0f));
    });
  }
}

TEST_P(LocalCollectiveTest, BarrierCompletes) {
  RunGroup(group_, [&](Collective& c) { EXPECT_TRUE(c.Barrier().ok()); });
}

TEST_P(LocalCollectiveTest, SendRecvAroundARing) {
  if (n() < 2) GTEST_SKIP() << "needs a peer";
  RunGroup(group_, [&](Collective& c) {
    const int next = (c.rank() + 1) % n();
    const int prev = (c.rank() + n() - 1) % n();
    std::vector<float> out(16, static_cast<float>(c.rank()));
    std::vector<float> in(16, -1.0f);
    // Sends wait for their receiver, so alternate the order to avoid a cycle.
    if (c.rank() % 2 == 0) {
      ASSERT_TRUE(c.Send(out.data(), out.size(), next, 3).ok());
      ASSERT_TRUE(c.Recv(in.data(), in.size(), prev, 3).ok());
    } else {
      ASSERT_TRUE(c.Recv(in.data(), in.size(), prev, 3).ok());
      ASSERT_TRUE(c.Send(out.data(), out.size(), next, 3).ok());
    }
    EXPECT_EQ(in, std::vector<float>(16, static_cast<float>(prev)));
  });
}

TEST_P(LocalCollectiveTest, RecvFromAnyReturnsTheActualSender) {
  if (n() < 2) GTEST_SKIP() << "needs a peer";
  RunGroup(group_, [&](Collective& c) {
    if (c.rank() == 0) {
      std::vector<int> peers;
      for (int r = 1; r < n(); ++r) peers.push_back(r);
      std::set<int> seen;
      for (int i = 1; i < n(); ++i) {
        std::vector<float> in(8, -1.0f);
        auto src = c.RecvFromAny(in.data(), in.size(), peers, 9);
        ASSERT_TRUE(src.ok()) << src.status();
        EXPECT_EQ(in, std::vector<float>(8, static_cast<float>(*src)));
        seen.insert(*src);
      }
      EXPECT_EQ(seen.size(), static_cast<size_t>(n() - 1));
    } else {
      std::vector<float> out(8, static_cast<float>(c.rank()));
      ASSERT_TRUE(c.Send(out.data(), out.size(), 0, 9).ok());
    }
  });
}

TEST_P(LocalCollectiveTest, SplitIntoHalvesAllReducesWithinEachHalf) {
  RunGroup(group_, [&](Collective& c) {
    const int half = (n() + 1) / 2;
    std::vector<int> lower, upper;
    for (int r = 0; r < n(); ++r) (r < half ? lower : upper).push_back(r);
    const bool in_lower = c.rank() < half;
    const auto& members = in_lower ? lower : upper;
    auto sub = c.Split(members, "halves");
    ASSERT_TRUE(sub.ok()) << sub.status();
    EXPECT_EQ((*sub)->size(), static_cast<int>(members.size()));
    EXPECT_EQ((*sub)->rank(), in_lower ? c.rank() : c.rank() - half);
    float v = static_cast<float>(c.rank());
    ASSERT_TRUE((*sub)->AllReduceSum(&v, 1).ok());
    float want = 0;
    for (int m : members) want += static_cast<float>(m);
    EXPECT_EQ(v, want);
    // The parent still works after a split.
    float one = 1;
    ASSERT_TRUE(c.AllReduceSum(&one, 1).ok());
    EXPECT_EQ(one, static_cast<float>(n()));
  });
}

TEST_P(LocalCollectiveTest, SplitNameCanBeReused) {
  RunGroup(group_, [&](Collective& c) {
    std::vector<int> all;
    for (int r = 0; r < n(); ++r) all.push_back(r);
    for (int epoch = 0; epoch < 3; ++epoch) {
      auto sub = c.Split(all, "every-epoch");
      ASSERT_TRUE(sub.ok()) << sub.status();
      ASSERT_TRUE((*sub)->Barrier().ok());
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, LocalCollectiveTest, ::testing::Range(1, 9));

TEST(LocalCollectiveFailureTest, MissingPeerGivesDeadlineExceeded) {
  auto group = NewLocalGroup(2, milliseconds(100));
  float v = 1;
  Status s = group[0]->AllReduceSum(&v, 1);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("rank(s) 1"), std::string::npos) << s;
  EXPECT_EQ(group[0]->Recv(&v, 1, 1, 0).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(group[0]->Send(&v, 1, 1, 0).code(), StatusCode::kDeadlineExceeded);
}

TEST(LocalCollectiveFailureTest, DestroyedPeerGivesUnavailable) {
  auto group = NewLocalGroup(3, milliseconds(10000));
  group[2].reset();
  float v = 1;
  Status s = group[0]->AllReduceSum(&v, 1);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("rank 2"), std::string::npos) << s;
  EXPECT_EQ(group[0]->Send(&v, 1, 2, 0).code(), StatusCode::kUnavailable);
  EXPECT_EQ(group[1]->Recv(&v, 1, 2, 0).code(), StatusCode::kUnavailable);
  EXPECT_EQ(group[1]->Split({1, 2}, "x").status().code(), StatusCode::kUnavailable);
}

TEST(LocalCollectiveFailureTest, MismatchedCollectivesAreInvalidArgument) {
  auto group = NewLocalGroup(2, milliseconds(200));
  Status a, b;
  std::thread t([&] {
    float v = 1;
    a = group[0]->AllReduceSum(&v, 1);
  });
  float w[2] = {1, 2};
  b = group[1]->Broadcast(w, 2, 0);
  t.join();
  // Whichever arrived second is told about the mismatch; the other times out.
  EXPECT_TRUE(a.code() == StatusCode::kInvalidArgument || b.code() == StatusCode::kInvalidArgument)
      << a << " / " << b;
}

TEST(LocalCollectiveFailureTest, BadArgumentsAreInvalidArgument) {
  auto group = NewLocalGroup(2, milliseconds(100));
  float v = 0;
  EXPECT_EQ(group[0]->Send(&v, 1, 0, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(group[0]->Recv(&v, 1, 5, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(group[0]->Broadcast(&v, 1, 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(group[0]->Split({1}, "x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(group[0]->Split({1, 0}, "x").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace star::shim
