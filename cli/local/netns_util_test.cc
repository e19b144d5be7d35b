// Which `ip` and `tc` star local runs (as root): never one found through $PATH.
#include "local/netns_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

namespace star::local {
namespace {

namespace fs = std::filesystem;

// A temporary directory holding fake `ip` and `tc` that leave a mark when run, put first
// on $PATH for the test's lifetime; PATH and the directory are restored and removed after.
class FakeToolsFirstOnPath {
 public:
  FakeToolsFirstOnPath() {
    std::string tmpl = (fs::temp_directory_path() / "star-fake-ip-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return;
    dir_ = tmpl;
    for (const char* tool : {"ip", "tc"}) {
      const fs::path script = dir_ / tool;
      std::ofstream(script) << "#!/bin/sh\ntouch '" << (dir_ / "ran").string() << "'\n";
      ::chmod(script.c_str(), 0755);
    }
    if (const char* path = std::getenv("PATH")) old_path_ = path;
    ::setenv("PATH", (dir_.string() + ":" + old_path_.value_or("/usr/bin:/bin")).c_str(), 1);
  }
  ~FakeToolsFirstOnPath() {
    if (old_path_) {
      ::setenv("PATH", old_path_->c_str(), 1);
    } else {
      ::unsetenv("PATH");
    }
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  bool ok() const { return !dir_.empty(); }
  const fs::path& dir() const { return dir_; }
  bool ran() const { return fs::exists(dir_ / "ran"); }

 private:
  fs::path dir_;
  std::optional<std::string> old_path_;
};

TEST(FindSystemProgramTest, LooksInTheFixedSystemDirsOnlyNotPath) {
  FakeToolsFirstOnPath fake;
  ASSERT_TRUE(fake.ok());
  // $PATH would choose the fake: the fixture is in effect.
  auto on_path = FindProgram("ip");
  ASSERT_TRUE(on_path.ok()) << on_path.status();
  EXPECT_EQ(*on_path, (fake.dir() / "ip").string());
  for (const char* tool : {"ip", "tc"}) {
    auto found = FindSystemProgram(tool);
    if (!found.ok()) {
      EXPECT_EQ(found.status().code(), StatusCode::kNotFound) << found.status();
      continue;
    }
    EXPECT_NE(found->rfind(fake.dir().string(), 0), 0u) << *found;
    const std::string dir = fs::path(*found).parent_path().string();
    EXPECT_TRUE(dir == "/usr/sbin" || dir == "/sbin" || dir == "/usr/bin" || dir == "/bin")
        << *found;
  }
  EXPECT_EQ(FindSystemProgram("./ip").status().code(), StatusCode::kInvalidArgument);
}

// Regression: RunCommand found `ip` and `tc` through $PATH while star local ran as root.
TEST(RunCommandTest, AFakeIpFirstOnPathIsNotRun) {
  FakeToolsFirstOnPath fake;
  ASSERT_TRUE(fake.ok());
  for (const char* tool : {"ip", "tc"}) {
    auto r = RunCommand({tool, "-V"});
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status();
    }
    EXPECT_FALSE(fake.ran()) << tool << " was run from " << fake.dir();
  }
}

TEST(RunCommandTest, APathIsRunAsGiven) {
  FakeToolsFirstOnPath fake;
  ASSERT_TRUE(fake.ok());
  auto r = RunCommand({(fake.dir() / "ip").string()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_TRUE(fake.ran());
}

}  // namespace
}  // namespace star::local
