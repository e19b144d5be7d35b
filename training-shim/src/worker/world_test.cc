// ConnectWorld hosts the rendezvous store behind the job's token.
#include "star/shim/world.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace star::shim {
namespace {

using std::chrono::milliseconds;

// A loopback port that was free a moment ago (0 if none could be found).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// Regression: the hosted store answered anyone who could reach its port.
TEST(ConnectWorldTest, TheHostedStoreTakesOnlyTheJobsToken) {
  const int port = FreePort();
  ASSERT_NE(port, 0);
  WorkerConfig config;
  config.store_url = "http://127.0.0.1:" + std::to_string(port);
  config.host_store = true;
  config.token = "job-token";
  config.timeout = milliseconds(30000);
  auto world = ConnectWorld(config);
  if (!world.ok() && world.status().code() == StatusCode::kUnavailable) {
    GTEST_SKIP() << "port " << port << " was taken meanwhile: " << world.status();
  }
  ASSERT_TRUE(world.ok()) << world.status();
  ASSERT_NE(world->store_server, nullptr);

  auto stranger = ConnectStore(config.store_url, StoreOptions{milliseconds(5000)});
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  EXPECT_EQ((*stranger)->Set(config.job + "/x", {1}).code(), StatusCode::kFailedPrecondition);

  auto member = ConnectStore(config.store_url, StoreOptions{milliseconds(5000), config.token});
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_TRUE((*member)->Set(config.job + "/x", {1}).ok());
}

}  // namespace
}  // namespace star::shim
