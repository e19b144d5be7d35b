#include "train/train_selector.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "star/operator/xgboost_selector.h"

namespace star::train {
namespace {

std::string TempFile(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("star-train-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TrainSelectorArgs Tiny(const std::string& out) {
  TrainSelectorArgs a;
  a.scenarios = 4;
  a.seed = 3;
  a.out = out;
  a.rounds = 3;
  a.holdout = 0.25;
  a.min_workers = 4;
  a.max_workers = 8;
  return a;
}

TEST(RandomScenario, StaysInItsRanges) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200; ++i) {
    const sim::Scenario s = RandomScenario(rng, 8, 1024);
    EXPECT_GE(s.workers, 8);
    EXPECT_LE(s.workers, 1024);
    ASSERT_FALSE(s.episodes.empty());
    EXPECT_LE(static_cast<int>(s.episodes.size()), std::max(1, s.workers / 8));
    for (const auto& e : s.episodes) {
      EXPECT_GE(e.worker, 0);
      EXPECT_LT(e.worker, s.workers);
      EXPECT_TRUE(e.cpu.has_value() != e.bandwidth.has_value());
    }
  }
}

TEST(Label, PicksTheClassWithTheLowestSimulatedTta) {
  std::mt19937_64 rng(2);
  const sim::Scenario s = RandomScenario(rng, 4, 8);
  auto l = Label(s);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_GE(l->tta[l->label], 0);
  for (double t : l->tta) {
    if (t >= 0) {
      EXPECT_LE(l->tta[l->label], t);
    }
  }
  EXPECT_GT(l->auto_tta, 0);
  EXPECT_EQ(l->features.workers, s.workers);
}

TEST(TrainSelector, WritesALoadableModelReproduciblyFromTheSeed) {
  const std::string a = TempFile("a.json"), b = TempFile("b.json");
  std::ostringstream out, err;
  ASSERT_EQ(RunTrainSelectorCommand(Tiny(a), out, err), 0) << err.str();
  EXPECT_NE(out.str().find("\"holdout_accuracy\""), std::string::npos);
  EXPECT_NE(err.str().find("4/4 scenarios labelled"), std::string::npos);
  std::ostringstream out2, err2;
  ASSERT_EQ(RunTrainSelectorCommand(Tiny(b), out2, err2), 0) << err2.str();
  EXPECT_EQ(Slurp(a), Slurp(b));
  auto model = op::XgboostSelector::Load(a);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST(TrainSelector, RefusesBadArgumentsNamingTheFlag) {
  std::ostringstream out, err;
  TrainSelectorArgs args = Tiny(TempFile("never.json"));
  args.scenarios = 1;
  EXPECT_EQ(RunTrainSelectorCommand(args, out, err), 1);
  EXPECT_NE(err.str().find("--scenarios"), std::string::npos);
  args = Tiny("");
  EXPECT_EQ(RunTrainSelectorCommand(args, out, err), 1);
  EXPECT_NE(err.str().find("--out"), std::string::npos);
  EXPECT_TRUE(out.str().empty());
}

}  // namespace
}  // namespace star::train
