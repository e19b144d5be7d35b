// GlooCollective with ranks in separate processes. The parent hosts the StoreServer and
// fork()+exec()s this test binary once per rank with --gtest_filter=GlooWorker.Main (exec,
// because the parent's HTTP threads do not survive a bare fork). A worker runs one
// scenario, writes its failures to <dir>/rank<r> and exits 0 on success. The parent reaps
// every worker by a deadline, SIGKILLing leftovers, and removes the temp dir.
#include "star/shim/gloo_collective.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "star/shim/store_server.h"

namespace star::shim {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// ---- worker side ----------------------------------------------------------------------

// Each scenario returns "" on success or a description of what went wrong.
std::string RunScenario(const std::string& scenario, Collective& c, Store& store) {
  std::ostringstream err;
  const int n = c.size(), r = c.rank();
  if (scenario == "allreduce") {
    std::vector<float> data(100000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((r + 1) * (i % 4096));
    Status s = c.AllReduceSum(data.data(), data.size());
    if (!s.ok()) return s.ToString();
    for (size_t i = 0; i < data.size(); ++i) {
      const float want = static_cast<float>(n * (n + 1) / 2 * (i % 4096));
      if (data[i] != want) {
        err << "element " << i << " = " << data[i] << ", want " << want;
        return err.str();
      }
    }
  } else if (scenario == "ring") {
    // Counts below, at and above the ring size (empty chunks, uneven chunks), then the
    // link sample: from the predecessor, covering every all-reduce since the last take.
    if (c.TakeLinkSample()) return "a link sample before any all-reduce";
    int64_t bytes = 0;
    for (size_t count : {size_t{1}, size_t(n - 1), size_t(n), size_t(n + 1), size_t{1001}}) {
      std::vector<float> data(count);
      for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(r * 1000 + i);
      if (Status s = c.AllReduceSum(data.data(), count); !s.ok()) return s.ToString();
      for (size_t i = 0; i < count; ++i) {
        const float want = static_cast<float>(1000 * n * (n - 1) / 2 + n * i);
        if (data[i] != want) {
          err << "count " << count << ": element " << i << " = " << data[i] << ", want " << want;
          return err.str();
        }
      }
      bytes += static_cast<int64_t>(sizeof(float) * (count / n + (count % n != 0)));
    }
    const std::optional<LinkSample> link = c.TakeLinkSample();
    if (!link) return "no link sample after the all-reduces";
    if (link->peer != (r + n - 1) % n) return "link from " + std::to_string(link->peer);
    if (!(link->seconds > 0)) return "link seconds " + std::to_string(link->seconds);
    // The fastest hop of each all-reduce: at most its largest chunk, at least its smallest.
    if (link->bytes > bytes || link->bytes < 5 * static_cast<int64_t>(sizeof(float))) {
      return "link bytes " + std::to_string(link->bytes) + " outside [20, " + std::to_string(bytes) + "]";
    }
    if (c.TakeLinkSample()) return "a second link sample without an all-reduce";
  } else if (scenario == "broadcast") {
    for (int root = 0; root < n; ++root) {
      std::vector<float> data(5000, r == root ? static_cast<float>(root + 10) : -1.0f);
      Status s = c.Broadcast(data.data(), data.size(), root);
      if (!s.ok()) return s.ToString();
      if (data != std::vector<float>(5000, static_cast<float>(root + 10))) {
        return "broadcast from " + std::to_string(root) + " gave wrong data";
      }
    }
    Status s = c.Barrier();
    if (!s.ok()) return s.ToString();
  } else if (scenario == "sendrecv") {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    std::vector<float> out(1000, static_cast<float>(r)), in(1000, -1.0f);
    Status a = r % 2 == 0 ? c.Send(out.data(), out.size(), next, 5)
                          : c.Recv(in.data(), in.size(), prev, 5);
    Status b = r % 2 == 0 ? c.Recv(in.data(), in.size(), prev, 5)
                          : c.Send(out.data(), out.size(), next, 5);
    if (!a.ok()) return a.ToString();
    if (!b.ok()) return b.ToString();
    if (in != std::vector<float>(1000, static_cast<float>(prev))) return "wrong data from prev";
  } else if (scenario == "recvfromany") {
    if (r == 0) {
      std::vector<int> peers;
      for (int p = 1; p < n; ++p) peers.push_back(p);
      std::set<int> seen;
      for (int i = 1; i < n; ++i) {
        std::vector<float> in(100, -1.0f);
        auto src = c.RecvFromAny(in.data(), in.size(), peers, 11);
        if (!src.ok()) return src.status().ToString();
        if (in != std::vector<float>(100, static_cast<float>(*src))) {
          return "data does not match reported sender " + std::to_string(*src);
        }
        seen.insert(*src);
      }
      if (seen.size() != static_cast<size_t>(n - 1)) return "a sender was reported twice";
    } else {
      std::vector<float> out(100, static_cast<float>(r));
      Status s = c.Send(out.data(), out.size(), 0, 11);
      if (!s.ok()) return s.ToString();
    }
  } else if (scenario == "split") {
    const int half = (n + 1) / 2;
    std::vector<int> members;
    for (int m = r < half ? 0 : half; m < (r < half ? half : n); ++m) members.push_back(m);
    for (int epoch = 0; epoch < 2; ++epoch) {  // the same name twice: a fresh rendezvous
      auto sub = c.Split(members, "halves");
      if (!sub.ok()) return sub.status().ToString();
      if ((*sub)->rank() != r - members.front()) return "wrong rank in split";
      float v = static_cast<float>(r);
      Status s = (*sub)->AllReduceSum(&v, 1);
      if (!s.ok()) return s.ToString();
      float want = 0;
      for (int m : members) want += static_cast<float>(m);
      if (v != want) return "split sum " + std::to_string(v) + ", want " + std::to_string(want);
    }
    float one = 1;
    Status s = c.AllReduceSum(&one, 1);
    if (!s.ok()) return s.ToString();
    if (one != static_cast<float>(n)) return "parent sum wrong after split";
  } else if (scenario == "kill") {
    // The last rank is the victim: it waits (in the store) to be SIGKILLed by the parent.
    // The others announce they are ready and enter an all-reduce that cannot complete.
    if (r == n - 1) {
      if (!store.Set("victim-ready", {1}).ok()) return "victim could not announce";
      (void)store.Get("never-set", milliseconds(20000));
      return "victim was not killed";
    }
    if (!store.Set("ready/" + std::to_string(r), {1}).ok()) return "could not announce";
    std::vector<float> data(1 << 16, 1.0f);
    Status s = c.AllReduceSum(data.data(), data.size());
    if (s.ok()) return "all-reduce with a dead peer returned OK";
    std::ofstream(std::string(Env("STAR_GLOO_DIR")) + "/status" + std::to_string(r)) << s;
    Status again = c.AllReduceSum(data.data(), data.size());
    if (again.code() != StatusCode::kAborted) return "second call not Aborted: " + again.ToString();
  } else {
    return "unknown scenario " + scenario;
  }
  return "";
}

TEST(GlooWorker, Main) {
  if (std::string(Env("STAR_GLOO_SCENARIO")).empty()) GTEST_SKIP() << "worker entry point only";
  const int rank = std::atoi(Env("STAR_GLOO_RANK"));
  const int size = std::atoi(Env("STAR_GLOO_SIZE"));
  const milliseconds timeout(std::atoi(Env("STAR_GLOO_TIMEOUT_MS")));
  std::string error;
  {
    auto store = ConnectStore(Env("STAR_GLOO_URL"), StoreOptions{timeout});
    if (!store.ok()) {
      error = store.status().ToString();
    } else {
      GlooOptions options;
      options.timeout = timeout;
      auto c = ConnectGloo(*store, rank, size, options);
      error = c.ok() ? RunScenario(Env("STAR_GLOO_SCENARIO"), **c, **store)
                     : c.status().ToString();
    }
  }
  std::ofstream(std::string(Env("STAR_GLOO_DIR")) + "/rank" + std::to_string(rank)) << error;
  std::_Exit(error.empty() ? 0 : 1);
}

// ---- parent side ----------------------------------------------------------------------

class GlooProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = StoreServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    char tmpl[] = "/tmp/star-gloo-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }

  void TearDown() override {
    for (pid_t pid : pids_) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // Starts `size` workers running `scenario` under prefix `prefix`.
  void Spawn(const std::string& scenario, int size, milliseconds timeout) {
    std::string self = std::filesystem::read_symlink("/proc/self/exe");
    for (int r = 0; r < size; ++r) {
      std::vector<std::string> env = {
          "STAR_GLOO_SCENARIO=" + scenario, "STAR_GLOO_RANK=" + std::to_string(r),
          "STAR_GLOO_SIZE=" + std::to_string(size), "STAR_GLOO_URL=" + server_->url(),
          "STAR_GLOO_TIMEOUT_MS=" + std::to_string(timeout.count()), "STAR_GLOO_DIR=" + dir_};
      for (char** e = environ; *e; ++e) {
        if (std::string(*e).rfind("STAR_GLOO_", 0) != 0) env.push_back(*e);
      }
      std::vector<char*> envp, argv;
      for (auto& e : env) envp.push_back(e.data());
      envp.push_back(nullptr);
      std::string filter = "--gtest_filter=GlooWorker.Main";
      const std::string log = dir_ + "/log" + std::to_string(r);
      argv = {self.data(), filter.data(), nullptr};
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
          ::dup2(fd, 1);
          ::dup2(fd, 2);
        }
        ::execve(self.c_str(), argv.data(), envp.data());
        std::_Exit(127);
      }
      pids_.push_back(pid);
    }
  }

  // Reaps every worker by the deadline (SIGKILLing leftovers); returns wait statuses.
  std::vector<int> ReapAll(milliseconds limit) {
    std::vector<int> statuses(pids_.size(), -1);
    const auto deadline = Clock::now() + limit;
    size_t left = pids_.size();
    while (left > 0 && Clock::now() < deadline) {
      for (size_t i = 0; i < pids_.size(); ++i) {
        if (pids_[i] <= 0) continue;
        int st = 0;
        if (::waitpid(pids_[i], &st, WNOHANG) == pids_[i]) {
          statuses[i] = st;
          pids_[i] = 0;
          --left;
        }
      }
      if (left > 0) std::this_thread::sleep_for(milliseconds(10));
    }
    return statuses;  // TearDown kills and reaps whatever is left (status stays -1)
  }

  std::string ReadFile(const std::string& name) {
    std::ifstream in(dir_ + "/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  void RunAndExpectSuccess(const std::string& scenario, int size) {
    Spawn(scenario, size, milliseconds(10000));
    auto statuses = ReapAll(milliseconds(25000));
    for (int r = 0; r < size; ++r) {
      const int st = statuses[static_cast<size_t>(r)];
      EXPECT_TRUE(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
          << scenario << " size " << size << " rank " << r << " (wait status " << st
          << "): " << ReadFile("rank" + std::to_string(r));
    }
  }

  std::unique_ptr<StoreServer> server_;
  std::string dir_;
  std::vector<pid_t> pids_;
};

TEST_F(GlooProcessTest, AllReduceGivesExactSumsAtSize2) { RunAndExpectSuccess("allreduce", 2); }
TEST_F(GlooProcessTest, AllReduceGivesExactSumsAtSize3) { RunAndExpectSuccess("allreduce", 3); }
TEST_F(GlooProcessTest, AllReduceGivesExactSumsAtSize4) { RunAndExpectSuccess("allreduce", 4); }
TEST_F(GlooProcessTest, RingSumsUnevenChunksAndTimesTheLinkFromThePredecessor) {
  RunAndExpectSuccess("ring", 3);
}
TEST_F(GlooProcessTest, RingOfTwoTimesItsOneLink) { RunAndExpectSuccess("ring", 2); }
TEST_F(GlooProcessTest, BroadcastFromEveryRoot) { RunAndExpectSuccess("broadcast", 3); }
TEST_F(GlooProcessTest, SendRecvAroundARing) { RunAndExpectSuccess("sendrecv", 3); }
TEST_F(GlooProcessTest, RecvFromAnyReturnsTheActualSender) {
  RunAndExpectSuccess("recvfromany", 4);
}
TEST_F(GlooProcessTest, SplitIntoHalvesAllReducesWithinEachHalf) {
  RunAndExpectSuccess("split", 4);
}

TEST_F(GlooProcessTest, KilledPeerMakesOthersFailInsteadOfHanging) {
  constexpr int kSize = 3;
  Spawn("kill", kSize, milliseconds(3000));
  auto watcher = ConnectStore(server_->url());
  ASSERT_TRUE(watcher.ok());
  ASSERT_TRUE((*watcher)->Wait({"victim-ready", "ready/0", "ready/1"}, milliseconds(20000)).ok());
  ASSERT_EQ(::kill(pids_.back(), SIGKILL), 0);
  auto statuses = ReapAll(milliseconds(20000));
  for (int r = 0; r < kSize - 1; ++r) {
    const int st = statuses[static_cast<size_t>(r)];
    EXPECT_TRUE(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << "rank " << r << " (wait status " << st << "): " << ReadFile("rank" + std::to_string(r));
    const std::string status = ReadFile("status" + std::to_string(r));
    EXPECT_TRUE(status.rfind("UNAVAILABLE", 0) == 0 || status.rfind("DEADLINE_EXCEEDED", 0) == 0)
        << status;
    EXPECT_NE(status.find("AllReduceSum"), std::string::npos) << status;
  }
  const int victim = statuses.back();
  EXPECT_TRUE(victim != -1 && WIFSIGNALED(victim) && WTERMSIG(victim) == SIGKILL);
}

}  // namespace
}  // namespace star::shim
