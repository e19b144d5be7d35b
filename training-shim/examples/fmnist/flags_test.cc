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

// The job's global batch, as STAR_GLOBAL_BATCH or the flag gives it.
Flags WorkerOf(int rank, int world, int64_t global_batch) {
  Flags f;
  f.rank = rank;
  f.world = world;
  f.global_batch = global_batch;
  return f;
}

TEST(FmnistFlags, WithoutBatchAWorkerTakesItsShareOfTheJobsGlobalBatch) {
  Flags f = WorkerOf(1, 4, 256);
  ASSERT_TRUE(ResolveBatch(&f).ok());
  EXPECT_EQ(f.batch, 64);
  f = WorkerOf(3, 4, 10);  // EqualBatches(10, 4) = {3, 3, 2, 2}, as star local splits it
  ASSERT_TRUE(ResolveBatch(&f).ok());
  EXPECT_EQ(f.batch, 2);
  f = WorkerOf(0, 4, 0);
  ASSERT_TRUE(ResolveBatch(&f).ok());
  EXPECT_EQ(f.batch, 64) << "no global batch: the default";
}

TEST(FmnistFlags, ABatchThatDisagreesWithTheJobsGlobalBatchIsRefusedNamingBoth) {
  Flags f = WorkerOf(1, 4, 256);
  f.batch = 128;
  f.batch_given = true;
  const Status s = ResolveBatch(&f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "the trainer's --batch 128 disagrees with spec.training.globalBatchSize 256 (STAR_GLOBAL_BATCH), "
            "whose share for worker 1 of 4 is 64");
  f.batch = 64;
  EXPECT_TRUE(ResolveBatch(&f).ok());
}

TEST(FmnistFlags, TheJobsSettingsComeFromTheEnvironmentAndTheFlagsAgreeWithThem) {
  setenv("STAR_GLOBAL_BATCH", "256", 1);
  setenv("STAR_MAX_ITERATIONS", "300", 1);
  setenv("STAR_WORLD_SIZE", "4", 1);
  Flags f;
  ASSERT_EQ(Parse({}, nullptr, &f), -1);
  EXPECT_EQ(f.batch, 64);
  EXPECT_EQ(f.max_iterations, 300);
  f = Flags();
  ASSERT_EQ(Parse({"--max-iterations", "5"}, nullptr, &f), -1);
  EXPECT_EQ(f.max_iterations, 5) << "the flag wins";
  f = Flags();
  EXPECT_EQ(Parse({"--batch", "32"}, nullptr, &f), 2) << "32 x 4 is not 256";
  setenv("STAR_AMP_DTYPE", "float16", 1);
  f = Flags();
  EXPECT_NE(Parse({}, nullptr, &f), -1) << "float16 is refused";
  for (const char* name : {"STAR_GLOBAL_BATCH", "STAR_MAX_ITERATIONS", "STAR_WORLD_SIZE", "STAR_AMP_DTYPE"}) {
    unsetenv(name);
  }
}

}  // namespace
}  // namespace star::fmnist
