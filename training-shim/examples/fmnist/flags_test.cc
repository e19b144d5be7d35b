#include "flags.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace star::fmnist {
namespace {

// ParseFlags over `args` (after the program name) with OMP_NUM_THREADS as given
// (nullptr: unset); the exit status it asked for, or -1 to run.
int Parse(std::vector<std::string> args, const char* omp_threads, Flags* flags) {
  if (omp_threads) {
    setenv("OMP_NUM_THREADS", omp_threads, 1);
  } else {
    unsetenv("OMP_NUM_THREADS");
  }
  args.insert(args.begin(), "star-fmnist");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  const std::optional<int> exit = ParseFlags(static_cast<int>(argv.size()), argv.data(), flags);
  unsetenv("OMP_NUM_THREADS");
  return exit.value_or(-1);
}

TEST(FmnistFlags, ThreadsComeFromOmpNumThreadsUnlessTheFlagGivesThem) {
  Flags f;
  ASSERT_EQ(Parse({}, nullptr, &f), -1);
  EXPECT_EQ(f.threads, 2) << "the default without a CPU limit";
  f = Flags();
  ASSERT_EQ(Parse({}, "1", &f), -1);
  EXPECT_EQ(f.threads, 1) << "what the operator sets for a limit of 1 core or less";
  f = Flags();
  ASSERT_EQ(Parse({"--threads", "3"}, "1", &f), -1);
  EXPECT_EQ(f.threads, 3) << "the flag wins";
  f = Flags();
  EXPECT_NE(Parse({}, "0", &f), -1) << "a bad OMP_NUM_THREADS stops the program";
}

}  // namespace
}  // namespace star::fmnist
