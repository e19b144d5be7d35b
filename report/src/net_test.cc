#include "star/report/net.h"

#include <gtest/gtest.h>

#include <vector>

namespace star::report {
namespace {

TEST(ListenOnPortTest, RetriesPickedPortsUntilOneListens) {
  std::vector<int> tried;
  StatusOr<int> port = ListenOnPort("127.0.0.1", 0, [&tried](int p) {
    tried.push_back(p);
    return tried.size() < 3 ? Status::Unavailable("address in use") : Status::Ok();
  });
  ASSERT_TRUE(port.ok()) << port.status().message();
  ASSERT_EQ(tried.size(), 3u);
  EXPECT_EQ(*port, tried.back());
  for (int p : tried) EXPECT_GT(p, 0);
}

TEST(ListenOnPortTest, AGivenPortIsTriedOnceAndTheErrorKept) {
  int calls = 0;
  StatusOr<int> port = ListenOnPort("127.0.0.1", 4242, [&calls](int p) {
    ++calls;
    EXPECT_EQ(p, 4242);
    return Status::Unavailable("address in use");
  });
  EXPECT_EQ(calls, 1);
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(port.status().message(), "cannot listen on 127.0.0.1:4242: address in use");
}

TEST(ListenOnPortTest, PortOutsideTheRangeIsRefusedWithoutListening) {
  bool called = false;
  StatusOr<int> port = ListenOnPort("127.0.0.1", 70000, [&called](int) {
    called = true;
    return Status::Ok();
  });
  EXPECT_FALSE(called);
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(port.status().message().find("port"), std::string::npos);
}

}  // namespace
}  // namespace star::report
