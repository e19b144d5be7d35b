// The learned selector over an XGBoost model (select::LearnedSelector, core's
// select/learned.h): the adapter that calls XGBoost's C API, kept out of core's pure
// code. Built only where libxgboost is found (CMake target star_operator_ml; the
// STAR_HAVE_XGBOOST compile definition is set for its users).
//
// A selector model is a multi-class booster (objective multi:softprob) over
// select::kSelectorFeatureCount features with select::kSelectorClassCount classes;
// Load() refuses anything else. Errors cross the boundary as Status naming the file;
// XGBoost's own message (XGBGetLastError) is appended.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "star/core/select/learned.h"
#include "star/core/status.h"

namespace star::op {

// Labelled rows for training: features row-major, kSelectorFeatureCount per row.
struct SelectorTrainingSet {
  std::vector<float> features;  // rows x kSelectorFeatureCount
  std::vector<int> labels;      // one class in [0, kSelectorClassCount) per row
};

struct SelectorTrainOptions {
  uint64_t seed = 1;        // XGBoost's seed; training is deterministic for it. Default 1.
  int rounds = 50;          // boosting rounds, >= 1. Default 50.
  int max_depth = 6;        // tree depth, >= 1. Default 6.
  double eta = 0.3;         // learning rate, in (0, 1]. Default 0.3.
};

// Owns one booster. Not thread-safe: use one per thread, or serialise calls.
class XgboostSelector : public select::LearnedSelector {
 public:
  // Loads a model file (XGBoost JSON or UBJSON). Errors: NotFound when the file cannot
  // be opened; InvalidArgument when it is not an XGBoost model, or not a selector model
  // (wrong feature count, objective or class count); each names the file.
  [[nodiscard]] static StatusOr<std::unique_ptr<XgboostSelector>> Load(const std::string& path);
  // Trains a selector model on `set` (single-threaded, so deterministic for the seed).
  // Errors: InvalidArgument naming the field for a bad set or options; Internal for an
  // XGBoost failure.
  [[nodiscard]] static StatusOr<std::unique_ptr<XgboostSelector>> Train(
      const SelectorTrainingSet& set, const SelectorTrainOptions& options = {});

  ~XgboostSelector() override;
  XgboostSelector(const XgboostSelector&) = delete;
  XgboostSelector& operator=(const XgboostSelector&) = delete;

  // Writes the model (JSON when `path` ends in .json). Errors: Unavailable naming the file.
  [[nodiscard]] Status Save(const std::string& path) const;

  // Class probabilities (kSelectorClassCount per row) for row-major rows of
  // kSelectorFeatureCount features. Errors: InvalidArgument for a ragged input;
  // Internal for an XGBoost failure (naming the model's file, if any).
  [[nodiscard]] StatusOr<std::vector<float>> Predict(const std::vector<float>& rows) const;

  // LearnedSelector: Predict() of one row.
  [[nodiscard]] StatusOr<std::vector<float>> Scores(
      const select::SelectorFeatures& features) override;

  // The file it was loaded from ("" for a trained model not yet saved).
  const std::string& path() const { return path_; }

 private:
  XgboostSelector(void* booster, std::string path) : booster_(booster), path_(std::move(path)) {}
  void* booster_;  // BoosterHandle
  std::string path_;
};

}  // namespace star::op
