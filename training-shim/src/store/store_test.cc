// The Store contract, run against the in-memory store and the HTTP server + client.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>


#include <functional>
#include <limits>
#include <thread>

#include "star/shim/store.h"
#include "star/shim/store_server.h"

namespace star::shim {
namespace {

using std::chrono::milliseconds;

Bytes B(const std::string& s) { return Bytes(s.begin(), s.end()); }

struct Backend {
  std::string name;
  std::string token;  // the HTTP store's token, for Other()
  std::function<void(std::unique_ptr<StoreServer>*, std::shared_ptr<Store>*)> make;
};

class StoreContractTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    GetParam().make(&server_, &store_);
    ASSERT_NE(store_, nullptr);
  }
  // A second client of the same store (another connection for HTTP).
  std::shared_ptr<Store> Other() {
    if (!server_) return store_;
    auto s = ConnectStore(server_->url(), StoreOptions{milliseconds(30000), GetParam().token});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : nullptr;
  }
  std::unique_ptr<StoreServer> server_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreContractTest, SetThenGetReturnsTheValue) {
  ASSERT_TRUE(store_->Set("a", B("hello")).ok());
  auto v = store_->Get("a", milliseconds(1000));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, B("hello"));
  ASSERT_TRUE(store_->Set("a", B("")).ok());
  v = store_->Get("a", milliseconds(1000));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->empty());
}

TEST_P(StoreContractTest, BinaryValuesRoundTrip) {
  Bytes value;
  for (int i = 0; i < 256; ++i) value.push_back(static_cast<uint8_t>(i));
  ASSERT_TRUE(store_->Set("bin", value).ok());
  auto v = store_->Get("bin", milliseconds(1000));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, value);
}

TEST_P(StoreContractTest, GetWaitsForASetFromAnotherThread) {
  auto other = Other();
  ASSERT_NE(other, nullptr);
  std::thread setter([&] {
    // Set only once the getter is known to be waiting: it announced itself via "waiting".
    auto w = other->Get("waiting", milliseconds(10000));
    EXPECT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE(other->Set("late", B("v")).ok());
  });
  ASSERT_TRUE(store_->Set("waiting", B("1")).ok());
  auto v = store_->Get("late", milliseconds(10000));
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, B("v"));
}

TEST_P(StoreContractTest, GetTimesOutWithDeadlineExceededNamingTheKey) {
  auto v = store_->Get("missing", milliseconds(200));
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(v.status().message(), "store: key \"missing\" not set within 200 ms");
}

TEST_P(StoreContractTest, WaitReturnsWhenAllKeysExistAndNamesTheMissingOne) {
  ASSERT_TRUE(store_->Set("k1", B("1")).ok());
  ASSERT_TRUE(store_->Set("k2", B("2")).ok());
  EXPECT_TRUE(store_->Wait({"k1", "k2"}, milliseconds(1000)).ok());
  Status s = store_->Wait({"k1", "k3"}, milliseconds(200));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("\"k3\""), std::string::npos) << s;
}

TEST_P(StoreContractTest, AddIsAtomicUnderConcurrency) {
  constexpr int kThreads = 4;
  constexpr int kAdds = 50;
  std::vector<std::shared_ptr<Store>> clients;
  for (int t = 0; t < kThreads; ++t) clients.push_back(Other());
  std::vector<std::thread> threads;
  std::vector<std::vector<int64_t>> seen(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i) {
        auto v = clients[static_cast<size_t>(t)]->Add("counter", 1);
        ASSERT_TRUE(v.ok()) << v.status();
        seen[static_cast<size_t>(t)].push_back(*v);
      }
    });
  }
  for (auto& th : threads) th.join();
  auto total = store_->Add("counter", 0);
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, kThreads * kAdds);
  // Every returned value is distinct: no two adds saw the same old value.
  std::vector<int64_t> all;
  for (auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
  auto text = store_->Get("counter", milliseconds(1000));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, B(std::to_string(kThreads * kAdds)));
}

TEST_P(StoreContractTest, AddOnANonIntegerIsInvalidArgument) {
  ASSERT_TRUE(store_->Set("text", B("abc")).ok());
  auto v = store_->Add("text", 1);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  auto neg = store_->Add("neg", -5);
  ASSERT_TRUE(neg.ok()) << neg.status();
  EXPECT_EQ(*neg, -5);
}

TEST_P(StoreContractTest, KeysWithOddCharactersAreDistinctAndRoundTrip) {
  const std::vector<std::string> keys = {"a/b",   "a%2Fb", "sp ace", "q?x=1&y", "#frag",
                                         "ünï",   "",      "..",     "a+b",     "a\nb",
                                         "star/rank/0"};
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(store_->Set(keys[i], B("v" + std::to_string(i))).ok()) << keys[i];
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    auto v = store_->Get(keys[i], milliseconds(1000));
    ASSERT_TRUE(v.ok()) << keys[i] << ": " << v.status();
    EXPECT_EQ(*v, B("v" + std::to_string(i))) << keys[i];
  }
}

// Regression: a deadline of now + timeout overflowed for the largest timeouts (UB, caught
// by UBSan in build-asan), and the wrapped deadline gave up at once.
TEST_P(StoreContractTest, TheLargestTimeoutDoesNotOverflowTheDeadline) {
  ASSERT_TRUE(store_->Set("k", B("v")).ok());
  auto v = store_->Get("k", milliseconds::max());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, B("v"));
  EXPECT_TRUE(store_->Wait({"k"}, milliseconds::max()).ok());
}

// Regression: a counter's sum overflowed int64 (UB).
TEST_P(StoreContractTest, ACounterThatWouldLeaveInt64IsInvalidArgument) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  ASSERT_TRUE(store_->Add("c", kMax).ok());
  auto v = store_->Add("c", 1);
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument) << v.status();
  auto same = store_->Add("c", 0);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(*same, kMax);
}

void StartHttp(const std::string& token, std::unique_ptr<StoreServer>* server,
               std::shared_ptr<Store>* store) {
  StoreServerOptions options;
  options.token = token;
  auto s = StoreServer::Start("127.0.0.1", 0, options);
  ASSERT_TRUE(s.ok()) << s.status();
  *server = std::move(*s);
  auto c = ConnectStore((*server)->url(), StoreOptions{milliseconds(30000), token});
  ASSERT_TRUE(c.ok()) << c.status();
  *store = *c;
}

INSTANTIATE_TEST_SUITE_P(
    Backends, StoreContractTest,
    ::testing::Values(
        Backend{"InMemory", "",
                [](std::unique_ptr<StoreServer>*, std::shared_ptr<Store>* store) {
                  *store = NewInMemoryStore();
                }},
        Backend{"Http", "",
                [](std::unique_ptr<StoreServer>* server, std::shared_ptr<Store>* store) {
                  StartHttp("", server, store);
                }},
        Backend{"HttpWithToken", "0123456789abcdef0123456789abcdef",
                [](std::unique_ptr<StoreServer>* server, std::shared_ptr<Store>* store) {
                  StartHttp("0123456789abcdef0123456789abcdef", server, store);
                }}),
    [](const ::testing::TestParamInfo<Backend>& info) { return info.param.name; });

// A port that nothing listens on: bound (so no one else takes it) but never listen()ed.
class UnusedPort {
 public:
  UnusedPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~UnusedPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(HttpStoreTest, NothingListeningGivesUnavailableNamingTheUrl) {
  UnusedPort unused;
  ASSERT_NE(unused.port(), 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(unused.port());
  auto store = ConnectStore(url, StoreOptions{milliseconds(300)});
  ASSERT_TRUE(store.ok()) << store.status();
  Status set = (*store)->Set("k", B("v"));
  EXPECT_EQ(set.code(), StatusCode::kUnavailable) << set;
  EXPECT_NE(set.message().find(url), std::string::npos) << set;
  auto get = (*store)->Get("k", milliseconds(300));
  EXPECT_EQ(get.status().code(), StatusCode::kUnavailable) << get.status();
  auto add = (*store)->Add("k", 1);
  EXPECT_EQ(add.status().code(), StatusCode::kUnavailable) << add.status();
}

TEST(HttpStoreTest, ClientRetriesUntilTheServerStarts) {
  // Pick a port, start the client's Get first, then the server on that port.
  int port = 0;
  {
    UnusedPort unused;
    port = unused.port();
  }
  ASSERT_NE(port, 0);
  auto client = ConnectStore("http://127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(client.ok());
  StatusOr<Bytes> got = Status::Internal("not run");
  std::thread getter([&] { got = (*client)->Get("k", milliseconds(10000)); });
  auto server = StoreServer::Start("127.0.0.1", port);
  if (!server.ok()) {
    getter.join();
    GTEST_SKIP() << "port " << port << " was taken meanwhile: " << server.status();
  }
  auto setter = ConnectStore((*server)->url());
  ASSERT_TRUE(setter.ok());
  EXPECT_TRUE((*setter)->Set("k", B("v")).ok());
  getter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, B("v"));
}

TEST(HttpStoreTest, ServerReportsItsPortAndUrl) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_GT((*server)->port(), 0);
  EXPECT_EQ((*server)->url(), "http://127.0.0.1:" + std::to_string((*server)->port()));
  auto again = StoreServer::Start("127.0.0.1", (*server)->port());
  EXPECT_EQ(again.status().code(), StatusCode::kUnavailable);
}

TEST(HttpStoreTest, StopAnswersPendingLongPolls) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = ConnectStore((*server)->url(), StoreOptions{milliseconds(500)});
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Set("ready", B("1")).ok());
  (*server)->Stop();
  auto got = (*client)->Get("never", milliseconds(500));
  EXPECT_FALSE(got.ok());
}

TEST(HttpStoreTest, MalformedUrlIsInvalidArgument) {
  EXPECT_EQ(ConnectStore("not a url").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ConnectStore("ftp://x:1").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace star::shim
