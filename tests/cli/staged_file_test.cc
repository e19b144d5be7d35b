#include "staged_file.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace star::cli {
namespace {

namespace fs = std::filesystem;

class StagedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("star_staged_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    path_ = (dir_ / "out.txt").string();
    std::ofstream(path_) << "old";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Contents() const {
    std::ifstream f(path_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(StagedFileTest, CommitReplacesTheFile) {
  StagedFile f;
  ASSERT_TRUE(f.Open("--out", path_).ok());
  f.stream() << "new";
  EXPECT_EQ(Contents(), "old");  // nothing changes before the commit
  ASSERT_TRUE(f.Commit().ok());
  EXPECT_EQ(Contents(), "new");
  EXPECT_FALSE(fs::exists(path_ + ".partial"));
}

TEST_F(StagedFileTest, AFileNeverCommittedLeavesThePathAsItWas) {
  {
    StagedFile f;
    ASSERT_TRUE(f.Open("--out", path_).ok());
    f.stream() << "new";
    ASSERT_TRUE(f.Close().ok());
  }
  EXPECT_EQ(Contents(), "old");
  EXPECT_FALSE(fs::exists(path_ + ".partial"));
}

TEST_F(StagedFileTest, AnUnwritablePathIsAnErrorNamingTheFlagAndPath) {
  StagedFile f;
  const std::string bad = (dir_ / "missing" / "out.txt").string();
  const Status s = f.Open("--trace", bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "--trace: cannot write \"" + bad + "\"");
  EXPECT_TRUE(f.Commit().ok());  // nothing opened, nothing to do
  EXPECT_FALSE(fs::exists(bad));
}

TEST_F(StagedFileTest, NoPathIsNoOutput) {
  StagedFile f;
  ASSERT_TRUE(f.Open("--out", "").ok());
  EXPECT_FALSE(f.is_open());
  EXPECT_TRUE(f.Commit().ok());
  EXPECT_EQ(Contents(), "old");
}

}  // namespace
}  // namespace star::cli
