// What the report server refuses before any report reaches its handler: bodies over the
// limit (413, by Content-Length or while a chunked body arrives) and requests without
// their job's token, answered the same whether or not the job exists.
#include "star/report/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_client.h>

#include <atomic>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "star/report/client.h"

namespace star::report {
namespace {

namespace http = web::http;

struct Answer {
  int status = 0;
  std::string body;
  bool operator==(const Answer& o) const { return status == o.status && body == o.body; }
};

std::ostream& operator<<(std::ostream& os, const Answer& a) { return os << a.status << " " << a.body; }

// POSTs `body` (with its Content-Length) to `path`; `token` "" = no Authorization.
Answer Post(const std::string& base_url, const std::string& path, const std::string& body, const std::string& token) {
  http::client::http_client_config config;
  config.set_timeout(std::chrono::seconds(60));
  http::client::http_client client(base_url, config);
  http::http_request request(http::methods::POST);
  request.set_request_uri(path);
  request.set_body(body, "application/json");
  if (!token.empty()) request.headers().add(http::header_names::authorization, "Bearer " + token);
  http::http_response response = client.request(request).get();
  return {response.status_code(), response.extract_utf8string(true).get()};
}

// POSTs `body` in chunks of `chunk` bytes (Transfer-Encoding: chunked, no Content-Length)
// over a plain socket; the status code of the answer, or -1 when there is none.
int PostChunked(int port, const std::string& path, const std::string& body, size_t chunk) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{60, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string out = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                    "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (size_t i = 0; i < body.size(); i += chunk) {
    const std::string part = body.substr(i, chunk);
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", part.size());
    out += size + part + "\r\n";
  }
  out += "0\r\n\r\n";
  int status = -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::send(fd, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size())) {
    char head[64] = {0};
    if (::recv(fd, head, sizeof head - 1, 0) > 12) status = std::atoi(head + 9);  // "HTTP/1.1 413"
  }
  ::close(fd);
  return status;
}

api::WorkerReport Report(const std::string& job) {
  api::WorkerReport r;
  r.job = job;
  r.worker = 0;
  r.iteration = 1;
  r.local_batch = 32;
  return r;
}

ReportServerOptions WithToken(const std::string& token) {
  ReportServerOptions o;
  o.token = token;
  return o;
}

const char kPath[] = "/v1/jobs/team-a%2Fresnet/reports";

class ServerLimits : public ::testing::Test {
 protected:
  void Start(ReportServerOptions o) {
    auto s = ReportServer::Start(std::move(o), [this](const api::WorkerReport&) {
      ++handled_;
      return std::optional<api::Decision>();
    });
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(s).value();
  }

  // Whether a well-formed report still gets through.
  bool ReportGetsThrough(const std::string& token) {
    auto client = ReportClient::Create({.base_url = server_->base_url(), .token = token});
    return client.ok() && (*client)->Send(Report("team-a/resnet")).ok();
  }

  std::atomic<int> handled_{0};
  std::unique_ptr<ReportServer> server_;
};

TEST_F(ServerLimits, ATenMegabyteBodyIs413AndTheServerGoesOn) {
  Start(WithToken("t"));
  const std::string huge(10 * 1024 * 1024, ' ');
  const Answer a = Post(server_->base_url(), kPath, huge, "t");
  EXPECT_EQ(a.status, 413) << a;
  EXPECT_EQ(nlohmann::json::parse(a.body, nullptr, false).value("error", ""), "body: larger than 1048576 bytes") << a;
  EXPECT_EQ(handled_, 0);
  EXPECT_TRUE(ReportGetsThrough("t"));
  EXPECT_EQ(handled_, 1);
}

TEST_F(ServerLimits, TheLimitIsInclusiveAndAppliesToChunkedBodies) {
  const std::string body = api::ToJson(Report("team-a/resnet")).dump();
  ReportServerOptions o;
  o.max_body_bytes = body.size();
  Start(o);
  EXPECT_EQ(Post(server_->base_url(), kPath, body, "").status, 200) << "a body of exactly the limit";
  EXPECT_EQ(PostChunked(server_->port(), kPath, body, 7), 200);
  EXPECT_EQ(Post(server_->base_url(), kPath, body + " ", "").status, 413);
  EXPECT_EQ(PostChunked(server_->port(), kPath, body + " ", 7), 413) << "no Content-Length to go by";
  EXPECT_EQ(PostChunked(server_->port(), kPath, std::string(4 * 1024 * 1024, ' '), 100000), 413);
  EXPECT_EQ(handled_, 2);
  EXPECT_TRUE(ReportGetsThrough(""));
}

TEST_F(ServerLimits, ABodyToARefusedRequestIsReadAndDroppedAndTheServerGoesOn) {
  Start(WithToken("t"));
  const std::string huge(10 * 1024 * 1024, ' ');
  EXPECT_EQ(Post(server_->base_url(), kPath, huge, "wrong").status, 401);
  EXPECT_EQ(Post(server_->base_url(), "/v1/nowhere", huge, "t").status, 404);
  EXPECT_TRUE(ReportGetsThrough("t"));
}

TEST_F(ServerLimits, AZeroLimitIsRefusedNamingTheOption) {
  ReportServerOptions o;
  o.max_body_bytes = 0;
  auto s = ReportServer::Start(o, [](const api::WorkerReport&) { return std::optional<api::Decision>(); });
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "max_body_bytes: must be > 0");
}

// Regression: an unknown job was a 404 and a wrong token a 401, which told a client
// without any token which jobs exist.
TEST_F(ServerLimits, AnUnknownJobAndAWrongTokenGetTheSameAnswer) {
  const std::map<std::string, std::string> tokens{{"team-a/resnet", "tok-a"}};
  ReportServerOptions o;
  o.job_token = [&tokens](const std::string& job) -> std::optional<std::string> {
    auto it = tokens.find(job);
    if (it == tokens.end()) return std::nullopt;
    return it->second;
  };
  Start(o);
  const std::string body = api::ToJson(Report("team-a/resnet")).dump();
  const std::string other = api::ToJson(Report("team-b/secret")).dump();
  const Answer wrong_token = Post(server_->base_url(), kPath, body, "tok-b");
  EXPECT_EQ(wrong_token.status, 401) << wrong_token;
  EXPECT_EQ(Post(server_->base_url(), kPath, body, ""), wrong_token) << "no token";
  EXPECT_EQ(Post(server_->base_url(), "/v1/jobs/team-b%2Fsecret/reports", other, "tok-b"), wrong_token)
      << "an unknown job";
  EXPECT_EQ(Post(server_->base_url(), "/v1/jobs/team-b%2Fsecret/reports", other, "tok-a"), wrong_token)
      << "an unknown job with another job's token";
  EXPECT_EQ(handled_, 0);
  EXPECT_EQ(Post(server_->base_url(), kPath, body, "tok-a").status, 200);
  EXPECT_EQ(handled_, 1);
}

}  // namespace
}  // namespace star::report
