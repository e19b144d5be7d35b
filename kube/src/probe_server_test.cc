#include "star/kube/probe_server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include <gtest/gtest.h>
// After gtest: cpprest defines a macro U that breaks gtest's templates.
#include <cpprest/http_client.h>

namespace star::kube {
namespace {

// A port the kernel just had free on 127.0.0.1.
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::pair<int, std::string> Get(const std::string& base, const std::string& path) {
  web::http::client::http_client c(base);
  auto r = c.request(web::http::methods::GET, path).get();
  return {r.status_code(), r.extract_string().get()};
}

TEST(ProbeServer, ServesMetricsHealthAndReadinessWithItsReason) {
  std::atomic<bool> ready{false};
  const std::string address = "127.0.0.1:" + std::to_string(FreePort());
  auto server = ProbeServer::Start(
      address,
      {[] { return std::string("star_x 1\n"); },
       [&ready]() -> std::optional<std::string> {
         if (ready) return std::nullopt;
         return "caches not synced";
       },
       nullptr},
      "--metrics");
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string base = "http://" + address;
  EXPECT_EQ(Get(base, "/metrics"), std::make_pair(200, std::string("star_x 1\n")));
  EXPECT_EQ(Get(base, "/healthz"), std::make_pair(200, std::string("ok\n")));
  EXPECT_EQ(Get(base, "/readyz"), std::make_pair(503, std::string("caches not synced\n")));
  ready = true;
  EXPECT_EQ(Get(base, "/readyz"), std::make_pair(200, std::string("ok\n")));
  EXPECT_EQ(Get(base, "/nope").first, 404);
}

TEST(ProbeServer, HealthzFailsWithTheReasonWhileNotAlive) {
  std::atomic<bool> alive{false};
  const std::string address = "127.0.0.1:" + std::to_string(FreePort());
  auto server = ProbeServer::Start(
      address,
      {[] { return std::string(); }, [] { return std::optional<std::string>(); }, nullptr,
       [&alive]() -> std::optional<std::string> {
         if (alive) return std::nullopt;
         return "reconcile of ns/a running for 312 s (limit 300 s)";
       }},
      "--metrics");
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string base = "http://" + address;
  EXPECT_EQ(Get(base, "/healthz"), std::make_pair(503, std::string("reconcile of ns/a running for 312 s (limit 300 s)\n")));
  alive = true;
  EXPECT_EQ(Get(base, "/healthz"), std::make_pair(200, std::string("ok\n")));
}

TEST(ProbeServer, MissingHandlersAndABadAddressAreClearErrors) {
  auto none = ProbeServer::Start("127.0.0.1:1", {}, "--metrics");
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  auto bad = ProbeServer::Start(
      "not a host:port", {[] { return std::string(); }, [] { return std::optional<std::string>(); }, nullptr},
      "--metrics-listen");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("--metrics-listen not a host:port: ", 0), 0u) << bad.status();
}

}  // namespace
}  // namespace star::kube
