#include "star/operator/xgboost_selector.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <xgboost/c_api.h>

namespace star::op {
namespace {

using select::kSelectorClassCount;
using select::kSelectorFeatureCount;

// A temporary directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("star-xgb-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A learnable toy set: the class is decided by the straggling degree (feature 2).
SelectorTrainingSet ToySet(int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  SelectorTrainingSet set;
  for (int r = 0; r < rows; ++r) {
    for (std::size_t f = 0; f < kSelectorFeatureCount; ++f) set.features.push_back(u(rng));
    const float degree = set.features[r * kSelectorFeatureCount + 2];
    set.labels.push_back(degree < 0.3f ? select::kSelectorClassSsgd
                         : degree < 0.6f ? select::kSelectorClassFixedKFirst + 2
                                         : select::kSelectorClassGroups);
  }
  return set;
}

SelectorTrainOptions Small() {
  SelectorTrainOptions o;
  o.rounds = 10;
  o.max_depth = 3;
  return o;
}

TEST(XgboostSelector, TrainedModelRoundTripsThroughItsFile) {
  TempDir dir;
  const SelectorTrainingSet set = ToySet(300, 1);
  auto trained = XgboostSelector::Train(set, Small());
  ASSERT_TRUE(trained.ok()) << trained.status().ToString();
  const std::string file = dir.File("selector.json");
  ASSERT_TRUE((*trained)->Save(file).ok());

  auto loaded = XgboostSelector::Load(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->path(), file);
  const SelectorTrainingSet probe = ToySet(50, 2);
  auto before = (*trained)->Predict(probe.features);
  auto after = (*loaded)->Predict(probe.features);
  ASSERT_TRUE(before.ok() && after.ok());
  ASSERT_EQ(before->size(), 50 * kSelectorClassCount);
  EXPECT_EQ(*before, *after);  // identical, not merely close

  // Saved again, the file is byte-for-byte the same model.
  const std::string again = dir.File("again.json");
  ASSERT_TRUE((*loaded)->Save(again).ok());
  auto reloaded = XgboostSelector::Load(again);
  ASSERT_TRUE(reloaded.ok());
  EXPECT_EQ(*(*reloaded)->Predict(probe.features), *after);
}

TEST(XgboostSelector, LearnsTheToyRuleAndGivesProbabilities) {
  auto model = XgboostSelector::Train(ToySet(400, 3), Small());
  ASSERT_TRUE(model.ok());
  const SelectorTrainingSet probe = ToySet(100, 4);
  auto p = (*model)->Predict(probe.features);
  ASSERT_TRUE(p.ok());
  int right = 0;
  for (std::size_t r = 0; r < probe.labels.size(); ++r) {
    float sum = 0;
    std::size_t best = 0;
    for (std::size_t c = 0; c < kSelectorClassCount; ++c) {
      const float v = (*p)[r * kSelectorClassCount + c];
      sum += v;
      if (v > (*p)[r * kSelectorClassCount + best]) best = c;
    }
    EXPECT_NEAR(sum, 1.0f, 1e-4);
    right += static_cast<int>(best) == probe.labels[r];
  }
  EXPECT_GE(right, 90);
}

TEST(XgboostSelector, TrainingIsReproducibleFromTheSeed) {
  const SelectorTrainingSet set = ToySet(200, 5);
  auto a = XgboostSelector::Train(set, Small());
  auto b = XgboostSelector::Train(set, Small());
  ASSERT_TRUE(a.ok() && b.ok());
  const SelectorTrainingSet probe = ToySet(20, 6);
  EXPECT_EQ(*(*a)->Predict(probe.features), *(*b)->Predict(probe.features));
}

TEST(XgboostSelector, ScoresFeedTheValidationWrapper) {
  auto model = XgboostSelector::Train(ToySet(300, 7), Small());
  ASSERT_TRUE(model.ok());
  select::SelectionInput in;
  in.batch_per_worker = 32;
  in.noise_scale = 100;
  in.iteration_seconds = {1, 1, 1, 1, 1, 1, 1, 4};
  auto s = select::SelectLearned(**model, in, {});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_GE(s->k, 1);
  EXPECT_LE(s->k, 8);
}

TEST(XgboostSelector, MissingFileIsNotFoundNamingIt) {
  auto m = XgboostSelector::Load("/nonexistent/selector.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("/nonexistent/selector.json"), std::string::npos);
}

TEST(XgboostSelector, NotAModelIsInvalidNamingIt) {
  TempDir dir;
  const std::string file = dir.File("garbage.json");
  std::ofstream(file) << "this is not a model\n";
  auto m = XgboostSelector::Load(file);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find(file), std::string::npos);
}

// A valid XGBoost model that is not a selector: 3 features, binary objective.
TEST(XgboostSelector, WrongFeatureCountIsRefusedNamingIt) {
  TempDir dir;
  const float x[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const float y[] = {0, 1, 0, 1};
  DMatrixHandle d = nullptr;
  ASSERT_EQ(XGDMatrixCreateFromMat(x, 4, 3, -1, &d), 0);
  ASSERT_EQ(XGDMatrixSetFloatInfo(d, "label", y, 4), 0);
  BoosterHandle b = nullptr;
  ASSERT_EQ(XGBoosterCreate(&d, 1, &b), 0);
  ASSERT_EQ(XGBoosterSetParam(b, "objective", "binary:logistic"), 0);
  ASSERT_EQ(XGBoosterSetParam(b, "nthread", "1"), 0);
  ASSERT_EQ(XGBoosterUpdateOneIter(b, 0, d), 0);
  const std::string file = dir.File("binary.json");
  ASSERT_EQ(XGBoosterSaveModel(b, file.c_str()), 0);
  XGBoosterFree(b);
  XGDMatrixFree(d);

  auto m = XgboostSelector::Load(file);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find(file), std::string::npos);
  EXPECT_NE(m.status().message().find("features"), std::string::npos);
}

TEST(XgboostSelector, BadTrainingInputNamesTheField) {
  SelectorTrainingSet set = ToySet(10, 8);
  set.labels[3] = 99;
  auto m = XgboostSelector::Train(set, Small());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("labels[3]"), std::string::npos);
  set = ToySet(10, 8);
  set.features.pop_back();
  EXPECT_FALSE(XgboostSelector::Train(set, Small()).ok());
  SelectorTrainOptions o = Small();
  o.rounds = 0;
  m = XgboostSelector::Train(ToySet(10, 8), o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("rounds"), std::string::npos);
}

}  // namespace
}  // namespace star::op
