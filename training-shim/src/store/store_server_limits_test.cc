// The store server's token and bounds, seen from raw HTTP requests and from ConnectStore.
#include <gtest/gtest.h>

#include <cpprest/http_client.h>
#include <cpprest/producerconsumerstream.h>

#include <thread>

#include "star/shim/store_server.h"
#include "store/store_auth.h"

namespace star::shim {
namespace {

namespace http = web::http;
using std::chrono::milliseconds;

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

Bytes B(const std::string& s) { return Bytes(s.begin(), s.end()); }

struct Reply {
  int code = 0;
  std::string body;
};

// One request to the server; `authorization` "" sends no Authorization header.
Reply Send(const StoreServer& server, const http::method& method, const std::string& path,
           const std::string& authorization = "", const std::optional<std::string>& body = {}) {
  http::client::http_client client(server.url());
  http::http_request req(method);
  req.set_request_uri(web::uri(path));
  if (!authorization.empty()) req.headers().add(http::header_names::authorization, authorization);
  if (body) req.set_body(std::vector<unsigned char>(body->begin(), body->end()));
  http::http_response resp = client.request(req).get();
  std::vector<unsigned char> text = resp.extract_vector().get();
  return Reply{resp.status_code(), std::string(text.begin(), text.end())};
}

std::unique_ptr<StoreServer> Start(StoreServerOptions options) {
  auto server = StoreServer::Start("127.0.0.1", 0, std::move(options));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

StoreServerOptions WithLimits(StoreLimits limits) {
  StoreServerOptions options;
  options.limits = limits;
  return options;
}

std::shared_ptr<Store> Client(const StoreServer& server, const std::string& token = "") {
  auto store = ConnectStore(server.url(), StoreOptions{milliseconds(5000), token});
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *store : nullptr;
}

TEST(BearerMatchesTest, OnlyTheExactHeaderMatches) {
  EXPECT_TRUE(BearerMatches("Bearer abc", "abc"));
  EXPECT_FALSE(BearerMatches("", "abc"));
  EXPECT_FALSE(BearerMatches("Bearer ab", "abc"));
  EXPECT_FALSE(BearerMatches("Bearer abcd", "abc"));
  EXPECT_FALSE(BearerMatches("bearer abc", "abc"));
  EXPECT_FALSE(BearerMatches("abc", "abc"));
}

// Regression: the store took any request, so any pod could overwrite a job's rendezvous.
TEST(StoreServerTokenTest, MissingOrWrongTokenGetsOneAnswer401AndChangesNothing) {
  StoreServerOptions options;
  options.token = kToken;
  auto server = Start(options);
  ASSERT_NE(server, nullptr);
  const std::string good = std::string("Bearer ") + kToken;
  ASSERT_EQ(Send(*server, http::methods::PUT, "/kv/k", good, "real").code, 204);
  for (const std::string& bad : {std::string(), std::string("Bearer "), good + "0",
                                 good.substr(0, good.size() - 1), std::string("Basic ") + kToken,
                                 std::string("Bearer 0123456789abcdef0123456789abcdee")}) {
    for (const auto& [method, path] : std::vector<std::pair<http::method, std::string>>{
             {http::methods::PUT, "/kv/k"}, {http::methods::GET, "/kv/k"},
             {http::methods::GET, "/kv/absent?timeout_ms=100000"}, {http::methods::POST, "/add/n"},
             {http::methods::GET, "/nowhere"}}) {
      const std::optional<std::string> body =
          method == http::methods::GET ? std::nullopt : std::optional<std::string>("1");
      Reply r = Send(*server, method, path, bad, body);
      EXPECT_EQ(r.code, 401) << method << " " << path << " with \"" << bad << "\"";
      EXPECT_EQ(r.body, "store: unauthorized");
    }
  }
  Reply r = Send(*server, http::methods::GET, "/kv/k", good);
  EXPECT_EQ(r.code, 200);
  EXPECT_EQ(r.body, "real");
  EXPECT_EQ(Send(*server, http::methods::GET, "/kv/n", good).code, 408);
}

TEST(StoreServerTokenTest, AClientWithTheWrongTokenFailsAtOnceWithFailedPrecondition) {
  StoreServerOptions options;
  options.token = kToken;
  auto server = Start(options);
  ASSERT_NE(server, nullptr);
  auto wrong = Client(*server, "not-the-token");
  auto none = Client(*server);
  ASSERT_NE(wrong, nullptr);
  ASSERT_NE(none, nullptr);
  for (const auto& store : {wrong, none}) {
    EXPECT_EQ(store->Set("k", B("v")).code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(store->Get("k", milliseconds(100000)).status().code(),
              StatusCode::kFailedPrecondition);
    EXPECT_EQ(store->Add("n", 1).status().code(), StatusCode::kFailedPrecondition);
  }
  auto right = Client(*server, kToken);
  ASSERT_TRUE(right->Set("k", B("v")).ok());
  auto v = right->Get("k", milliseconds(1000));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, B("v"));
}

TEST(StoreServerLimitsTest, AKeyOverTheLimitIsInvalidArgumentNamingIt) {
  StoreLimits limits;
  limits.max_key_bytes = 8;
  auto server = Start(WithLimits(limits));
  ASSERT_NE(server, nullptr);
  auto store = Client(*server);
  EXPECT_TRUE(store->Set("12345678", B("v")).ok());
  Status set = store->Set("123456789", B("v"));
  EXPECT_EQ(set.code(), StatusCode::kInvalidArgument) << set;
  EXPECT_NE(set.message().find("key of 9 bytes exceeds the limit of 8 bytes"), std::string::npos)
      << set;
  EXPECT_EQ(store->Get("123456789", milliseconds(100)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Add("123456789", 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(StoreServerLimitsTest, AValueOverTheLimitIs413AndInvalidArgument) {
  StoreLimits limits;
  limits.max_value_bytes = 16;
  auto server = Start(WithLimits(limits));
  ASSERT_NE(server, nullptr);
  auto store = Client(*server);
  EXPECT_TRUE(store->Set("k", Bytes(16, 'x')).ok());
  Status set = store->Set("k", Bytes(17, 'y'));
  EXPECT_EQ(set.code(), StatusCode::kInvalidArgument) << set;
  EXPECT_NE(set.message().find("body of 17 bytes exceeds the limit of 16 bytes"), std::string::npos)
      << set;
  EXPECT_EQ(Send(*server, http::methods::PUT, "/kv/k", "", std::string(17, 'y')).code, 413);
  auto v = store->Get("k", milliseconds(1000));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, Bytes(16, 'x'));
}

TEST(StoreServerLimitsTest, ABodyWithoutContentLengthIs411) {
  auto server = Start({});
  ASSERT_NE(server, nullptr);
  // A stream of unknown length goes out chunked, without Content-Length.
  concurrency::streams::producer_consumer_buffer<uint8_t> buffer;
  const std::string chunk = "value";
  buffer.putn_nocopy(reinterpret_cast<const uint8_t*>(chunk.data()), chunk.size()).wait();
  buffer.close(std::ios_base::out).wait();
  http::client::http_client client(server->url());
  http::http_request req(http::methods::PUT);
  req.set_request_uri(web::uri("/kv/k"));
  req.set_body(concurrency::streams::istream(buffer));
  http::http_response resp = client.request(req).get();
  EXPECT_EQ(resp.status_code(), 411);
  EXPECT_EQ(Send(*server, http::methods::GET, "/kv/k").code, 408);
}

TEST(StoreServerLimitsTest, NewKeysPastMaxKeysAreOutOfRangeButOverwritesStillWork) {
  StoreLimits limits;
  limits.max_keys = 2;
  auto server = Start(WithLimits(limits));
  ASSERT_NE(server, nullptr);
  auto store = Client(*server);
  ASSERT_TRUE(store->Set("a", B("1")).ok());
  ASSERT_TRUE(store->Add("b", 1).ok());
  Status full = store->Set("c", B("3"));
  EXPECT_EQ(full.code(), StatusCode::kOutOfRange) << full;
  EXPECT_NE(full.message().find("max_keys"), std::string::npos) << full;
  EXPECT_EQ(store->Add("d", 1).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(Send(*server, http::methods::PUT, "/kv/c", "", std::string("3")).code, 507);
  EXPECT_TRUE(store->Set("a", B("again")).ok());
  EXPECT_TRUE(store->Add("b", 1).ok());
}

TEST(StoreServerLimitsTest, TotalBytesPastTheLimitAreOutOfRangeAndCountOverwrites) {
  StoreLimits limits;
  limits.max_total_bytes = 10;  // keys and values together
  auto server = Start(WithLimits(limits));
  ASSERT_NE(server, nullptr);
  auto store = Client(*server);
  ASSERT_TRUE(store->Set("a", B("1234")).ok());  // 5 bytes
  ASSERT_TRUE(store->Set("b", B("1234")).ok());  // 10 bytes
  Status full = store->Set("c", B(""));
  EXPECT_EQ(full.code(), StatusCode::kOutOfRange) << full;
  EXPECT_NE(full.message().find("max_total_bytes"), std::string::npos) << full;
  EXPECT_EQ(store->Set("a", B("12345")).code(), StatusCode::kOutOfRange);
  ASSERT_TRUE(store->Set("a", B("")).ok());  // frees 4 bytes
  EXPECT_TRUE(store->Set("c", B("12")).ok());
}

TEST(StoreServerLimitsTest, LongPollsPastMaxWaitingAre429) {
  StoreLimits limits;
  limits.max_waiting = 1;
  auto server = Start(WithLimits(limits));
  ASSERT_NE(server, nullptr);
  Reply parked;
  std::thread poll([&] { parked = Send(*server, http::methods::GET, "/kv/k?timeout_ms=60000"); });
  ASSERT_TRUE(server->AwaitWaiting(1, milliseconds(30000)));
  Reply refused = Send(*server, http::methods::GET, "/kv/other?timeout_ms=60000");
  EXPECT_EQ(refused.code, 429);
  EXPECT_NE(refused.body.find("max_waiting"), std::string::npos) << refused.body;
  auto store = Client(*server);
  EXPECT_TRUE(store->Set("k", B("v")).ok());
  poll.join();
  EXPECT_EQ(parked.code, 200);
  EXPECT_EQ(parked.body, "v");
}

// Regression: timeout_ms=INT64_MAX overflowed the deadline (UB; UBSan in build-asan) and
// the wrapped deadline answered 408 at once instead of waiting for the key.
TEST(StoreServerLimitsTest, AHugeTimeoutMsIsClampedAndTheLongPollWaitsForTheKey) {
  for (const std::string& huge : {std::string("9223372036854775807"),
                                   std::string("99999999999999999999999")}) {
    auto server = Start({});
    ASSERT_NE(server, nullptr);
    Reply parked;
    std::thread poll([&] { parked = Send(*server, http::methods::GET, "/kv/k?timeout_ms=" + huge); });
    ASSERT_TRUE(server->AwaitWaiting(1, milliseconds(30000))) << huge;
    auto store = Client(*server);
    EXPECT_TRUE(store->Set("k", B("v")).ok());
    poll.join();
    EXPECT_EQ(parked.code, 200) << huge;
    EXPECT_EQ(parked.body, "v");
  }
}

TEST(StoreServerLimitsTest, ATimeoutMsThatIsNoIntegerIs400NamingTheField) {
  auto server = Start({});
  ASSERT_NE(server, nullptr);
  Reply r = Send(*server, http::methods::GET, "/kv/k?timeout_ms=soon");
  EXPECT_EQ(r.code, 400);
  EXPECT_EQ(r.body, "store: timeout_ms: \"soon\" is not an integer");
  EXPECT_EQ(Send(*server, http::methods::GET, "/kv/k?timeout_ms=-5").code, 408);
}

TEST(StoreServerLimitsTest, ZeroLimitsAreRefusedNamingTheField) {
  StoreLimits limits;
  limits.max_keys = 0;
  auto server = StoreServer::Start("127.0.0.1", 0, WithLimits(limits));
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("max_keys"), std::string::npos) << server.status();
  limits = StoreLimits{};
  limits.max_poll = std::chrono::hours(25);
  server = StoreServer::Start("127.0.0.1", 0, WithLimits(limits));
  EXPECT_NE(server.status().message().find("max_poll"), std::string::npos) << server.status();
}

}  // namespace
}  // namespace star::shim
