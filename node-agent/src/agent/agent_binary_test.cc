// End-to-end tests of the star-agent binary on the real OS (cgroup v1 cpu controller):
// kill -9 after it journalled and applied, restart, remove the pod, originals come back;
// malformed allocation files change nothing; a corrupt journal is moved aside and the
// originals are rebuilt from the containers' cgroups. Skipped when the binary
// (built next to this test) or a writable cgroup v1 cpu hierarchy is missing.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

constexpr char kCpuRoot[] = "/sys/fs/cgroup/cpu";
constexpr char kUid[] = "7a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".new";
  std::ofstream(tmp, std::ios::trunc) << text;
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

// Polls `done` every 10 ms for at most `seconds`.
bool WaitFor(const std::function<bool()>& done, double seconds = 10) {
  const int rounds = static_cast<int>(seconds * 100);
  for (int i = 0; i < rounds; ++i) {
    if (done()) return true;
    timespec ts{0, 10'000'000};
    nanosleep(&ts, nullptr);
  }
  return done();
}

// A star-agent child process, SIGKILLed and reaped at scope exit if still running.
class Child {
 public:
  // `stderr_path`, when given, gets what the agent writes to stderr.
  explicit Child(const std::vector<std::string>& argv, const std::string& stderr_path = "") {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = stderr_path.empty()
                         ? -1
                         : ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) ::dup2(fd, 2);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Child() { Kill(SIGKILL); }
  bool running() const { return pid_ > 0; }
  // True when the process has ended (it is reaped then).
  bool Exited() {
    int status = 0;
    if (pid_ <= 0 || waitpid(pid_, &status, WNOHANG) != pid_) return pid_ <= 0;
    pid_ = -1;
    return true;
  }
  // Sends `sig` and reaps; returns the wait status (or -1).
  int Kill(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = -1;
    // SIGTERM: the agent stops within one poll interval; bounded by the SIGKILL below.
    if (!WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, 10)) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
    return status;
  }
  // Waits for exit (at most 10 s, then SIGKILL); returns the wait status.
  int Wait() {
    int status = -1;
    if (!WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, 10)) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      status = -1;
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
};

class AgentBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = (fs::read_symlink("/proc/self/exe").parent_path() / "star-agent").string();
    if (!fs::exists(binary_)) GTEST_SKIP() << "star-agent not built next to the test";
    if (geteuid() != 0 || !fs::exists(std::string(kCpuRoot) + "/cpu.cfs_quota_us")) {
      GTEST_SKIP() << "needs root and a cgroup v1 cpu hierarchy at " << kCpuRoot;
    }
    root_ = "star-agent-test-" + std::to_string(getpid());
    pod_dir_ = std::string(kCpuRoot) + "/" + root_ + "/kubepods/burstable/pod" + kUid;
    std::error_code ec;
    fs::create_directories(pod_dir_, ec);
    ASSERT_FALSE(ec) << ec.message();
    std::ofstream(pod_dir_ + "/cpu.cfs_quota_us") << "200000";
    ASSERT_EQ(Quota(), 200000);
    std::string tmpl = (fs::temp_directory_path() / "star-agent-bin-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    // Cgroups are removed leaf first with rmdir (their files cannot be unlinked).
    for (const std::string& c : containers_) ::rmdir((pod_dir_ + "/" + c).c_str());
    if (!pod_dir_.empty()) {
      fs::path p = pod_dir_;
      for (int i = 0; i < 4; ++i, p = p.parent_path()) ::rmdir(p.c_str());
    }
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  int64_t Quota() const {
    const std::string s = ReadFile(pod_dir_ + "/cpu.cfs_quota_us");
    return s.empty() ? 0 : std::stoll(s);
  }
  std::string Alloc(bool with_pod) const {
    std::string pods = with_pod ? std::string(R"({"namespace":"ns","name":"p","uid":")") + kUid +
                                      R"(","cpu":{"quotaMillicores":500,"weight":100}})"
                                : "";
    return R"({"metadata":{"name":"node-1"},"spec":{"pods":[)" + pods + "]}}";
  }
  std::vector<std::string> Args(bool once = false) const {
    std::vector<std::string> a = {binary_,       "--node",    "node-1", "--allocation-file",
                                  dir_ + "/a.json", "--cgroup-root", root_, "--journal",
                                  journal(),     "--metrics-address", "", "--poll-ms", "20"};
    if (once) a.push_back("--once");
    return a;
  }
  std::string journal() const { return dir_ + "/journal.json"; }

  // A container cgroup below the pod's, with its own quota.
  void AddContainer(const std::string& name, int64_t quota) {
    ASSERT_EQ(::mkdir((pod_dir_ + "/" + name).c_str(), 0755), 0) << name;
    containers_.push_back(name);
    std::ofstream(pod_dir_ + "/" + name + "/cpu.cfs_quota_us") << quota;
  }

  std::string binary_, root_, pod_dir_, dir_;
  std::vector<std::string> containers_;
};

TEST_F(AgentBinaryTest, KillNineAfterApplyThenRestartRestoresOriginalsOnRemoval) {
  WriteAtomically(dir_ + "/a.json", Alloc(true));
  {
    Child agent(Args());
    ASSERT_TRUE(agent.running());
    ASSERT_TRUE(WaitFor([&] {
      return ReadFile(journal()).find(kUid) != std::string::npos && Quota() == 50000;
    })) << "agent never applied; quota " << Quota();
    const int status = agent.Kill(SIGKILL);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  }
  Child agent(Args());
  ASSERT_TRUE(agent.running());
  WriteAtomically(dir_ + "/a.json", Alloc(false));
  EXPECT_TRUE(WaitFor([&] {
    return Quota() == 200000 && ReadFile(journal()).find(kUid) == std::string::npos;
  })) << "original not restored; quota " << Quota();
  const int status = agent.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(AgentBinaryTest, MalformedAllocationFileChangesNothing) {
  WriteAtomically(dir_ + "/a.json",
                  std::string(R"({"metadata":{"name":"node-1"},"spec":{"pods":[{"namespace":"ns",)"
                              R"("name":"p","uid":"../../../)") + kUid + R"("}]}})");
  Child agent(Args(/*once=*/true));
  const int status = agent.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_EQ(Quota(), 200000);
  EXPECT_FALSE(fs::exists(journal()));
}

TEST_F(AgentBinaryTest, BadHeadroomFlagsAreRefusedNamingThemAndChangeNothing) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--nic-capacity", "lots"}, {"--nic", "nosuch0"}};
  for (const auto& [flag, value] : cases) {
    // The headroom flags are checked before the kubeconfig (which does not exist here).
    std::vector<std::string> a = {binary_,   "--node",    "node-1", "--kubeconfig",
                                  dir_ + "/none", "--cgroup-root", root_, "--journal",
                                  journal(), "--metrics-address", "", flag, value};
    Child agent(a, dir_ + "/stderr");
    const int status = agent.Wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << flag << ": " << status;
    const std::string err = ReadFile(dir_ + "/stderr");
    EXPECT_NE(err.find(flag + (flag == "--nic" ? " " + value : ": \"" + value + "\"")),
              std::string::npos)
        << err;
  }
  EXPECT_EQ(Quota(), 200000);
}

// Regression: a corrupt journal made the agent exit 2 on every start, freezing the node.
// Now it is moved aside and the pod's original (the sum of its containers' quotas, not
// what the pod shows) is rebuilt, kept while the pod is allocated and restored after.
TEST_F(AgentBinaryTest, CorruptJournalIsMovedAsideAndOriginalsAreRebuilt) {
  // (cgroup v1 refuses a pod quota below one of its containers': each is at most 500m.)
  AddContainer("c1", 50000);
  AddContainer("c2", 50000);
  std::ofstream(pod_dir_ + "/cpu.cfs_quota_us") << "50000";  // throttled by an earlier run
  ASSERT_EQ(Quota(), 50000);
  const std::string corrupt = "{\"version\": 1, \"pods\": {";
  std::ofstream(journal()) << corrupt;
  WriteAtomically(dir_ + "/a.json", Alloc(true));
  Child first(Args(/*once=*/true));
  int status = first.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::vector<fs::path> aside;
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (e.path().filename().string().rfind("journal.json.corrupt-", 0) == 0) aside.push_back(e.path());
  }
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(ReadFile(aside[0].string()), corrupt);
  EXPECT_EQ(Quota(), 50000) << "the allocation is in force";
  EXPECT_NE(ReadFile(journal()).find("\"quotaUs\": 100000"), std::string::npos) << ReadFile(journal());

  WriteAtomically(dir_ + "/a.json", Alloc(false));
  Child second(Args(/*once=*/true));
  status = second.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(Quota(), 100000) << "the rebuilt original is restored";
  EXPECT_EQ(ReadFile(journal()).find(kUid), std::string::npos) << ReadFile(journal());
}

// The chart's uninstall path: $STAR_AGENT_MODE=release (set by the DaemonSet from its
// pod template's annotation) restores every original although the allocation still lists
// the pod, and the agent holds until it is stopped.
TEST_F(AgentBinaryTest, ReleaseModeRestoresEveryOriginalThenHolds) {
  WriteAtomically(dir_ + "/a.json", Alloc(true));
  Child apply(Args(/*once=*/true));
  ASSERT_TRUE(WIFEXITED(apply.Wait()));
  ASSERT_EQ(Quota(), 50000);
  ASSERT_NE(ReadFile(journal()).find(kUid), std::string::npos);

  ::setenv("STAR_AGENT_MODE", "release", 1);
  Child agent(Args());
  ::unsetenv("STAR_AGENT_MODE");
  ASSERT_TRUE(agent.running());
  EXPECT_TRUE(WaitFor([&] {
    return Quota() == 200000 && ReadFile(journal()).find(kUid) == std::string::npos;
  })) << "original not restored; quota " << Quota();
  EXPECT_FALSE(agent.Exited()) << "release mode holds until stopped";
  const int status = agent.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
