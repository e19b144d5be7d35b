#include "star/operator/xgboost_selector.h"

#include <fstream>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>
#include <xgboost/c_api.h>

namespace star::op {

using select::kSelectorClassCount;
using select::kSelectorFeatureCount;

namespace {

std::string LastError() {
  const char* e = XGBGetLastError();
  return e != nullptr ? std::string(e) : std::string("unknown XGBoost error");
}

std::string Quoted(const std::string& path) { return "model file \"" + path + "\""; }

// Frees a DMatrix at the end of a scope.
struct DMatrix {
  DMatrixHandle h = nullptr;
  ~DMatrix() {
    if (h != nullptr) XGDMatrixFree(h);
  }
};

// Frees a booster unless released.
struct Booster {
  BoosterHandle h = nullptr;
  ~Booster() {
    if (h != nullptr) XGBoosterFree(h);
  }
  BoosterHandle Release() {
    BoosterHandle out = h;
    h = nullptr;
    return out;
  }
};

// Checks that a loaded booster is a selector model; "" when it is, else the reason.
std::string NotASelector(BoosterHandle h) {
  bst_ulong features = 0;
  if (XGBoosterGetNumFeature(h, &features) != 0) return LastError();
  if (features != kSelectorFeatureCount) {
    return "expected " + std::to_string(kSelectorFeatureCount) + " features, got " +
           std::to_string(features);
  }
  bst_ulong len = 0;
  const char* config = nullptr;
  if (XGBoosterSaveJsonConfig(h, &len, &config) != 0) return LastError();
  const auto j = nlohmann::json::parse(std::string(config, len), nullptr, false);
  if (j.is_discarded()) return "unreadable configuration";
  const auto objective = j.value(nlohmann::json::json_pointer("/learner/objective/name"),
                                 std::string());
  if (objective != "multi:softprob") {
    return "expected objective multi:softprob, got \"" + objective + "\"";
  }
  const auto classes = j.value(
      nlohmann::json::json_pointer("/learner/learner_model_param/num_class"), std::string());
  if (classes != std::to_string(kSelectorClassCount)) {
    return "expected " + std::to_string(kSelectorClassCount) + " classes, got \"" + classes +
           "\"";
  }
  return "";
}

}  // namespace

StatusOr<std::unique_ptr<XgboostSelector>> XgboostSelector::Load(const std::string& path) {
  if (!std::ifstream(path)) return Status::NotFound(Quoted(path) + ": cannot open");
  Booster b;
  if (XGBoosterCreate(nullptr, 0, &b.h) != 0) {
    return Status::Internal(Quoted(path) + ": " + LastError());
  }
  if (XGBoosterLoadModel(b.h, path.c_str()) != 0) {
    return Status::InvalidArgument(Quoted(path) + ": not an XGBoost model: " + LastError());
  }
  if (std::string why = NotASelector(b.h); !why.empty()) {
    return Status::InvalidArgument(Quoted(path) + ": not a selector model: " + why);
  }
  if (XGBoosterSetParam(b.h, "nthread", "1") != 0) {
    return Status::Internal(Quoted(path) + ": " + LastError());
  }
  return std::unique_ptr<XgboostSelector>(new XgboostSelector(b.Release(), path));
}

StatusOr<std::unique_ptr<XgboostSelector>> XgboostSelector::Train(
    const SelectorTrainingSet& set, const SelectorTrainOptions& options) {
  const std::size_t rows = set.labels.size();
  if (rows == 0) return Status::InvalidArgument("labels: must not be empty");
  if (set.features.size() != rows * kSelectorFeatureCount) {
    return Status::InvalidArgument("features: expected " +
                                   std::to_string(rows * kSelectorFeatureCount) +
                                   " values (labels x features), got " +
                                   std::to_string(set.features.size()));
  }
  std::vector<float> labels(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    if (set.labels[i] < 0 || set.labels[i] >= static_cast<int>(kSelectorClassCount)) {
      return Status::InvalidArgument("labels[" + std::to_string(i) + "]: must be in [0, " +
                                     std::to_string(kSelectorClassCount) + "), got " +
                                     std::to_string(set.labels[i]));
    }
    labels[i] = static_cast<float>(set.labels[i]);
  }
  if (options.rounds < 1) {
    return Status::InvalidArgument("rounds: must be >= 1, got " + std::to_string(options.rounds));
  }
  if (options.max_depth < 1) {
    return Status::InvalidArgument("max_depth: must be >= 1, got " +
                                   std::to_string(options.max_depth));
  }
  if (!(options.eta > 0 && options.eta <= 1)) {
    return Status::InvalidArgument("eta: must be in (0, 1], got " + std::to_string(options.eta));
  }
  auto fail = [](const char* what) { return Status::Internal(std::string(what) + ": " + LastError()); };
  DMatrix d;
  if (XGDMatrixCreateFromMat(set.features.data(), rows, kSelectorFeatureCount,
                             std::numeric_limits<float>::quiet_NaN(), &d.h) != 0) {
    return fail("XGDMatrixCreateFromMat");
  }
  if (XGDMatrixSetFloatInfo(d.h, "label", labels.data(), rows) != 0) {
    return fail("XGDMatrixSetFloatInfo");
  }
  Booster b;
  if (XGBoosterCreate(&d.h, 1, &b.h) != 0) return fail("XGBoosterCreate");
  const std::string params[][2] = {
      {"objective", "multi:softprob"},
      {"num_class", std::to_string(kSelectorClassCount)},
      {"max_depth", std::to_string(options.max_depth)},
      {"eta", std::to_string(options.eta)},
      {"seed", std::to_string(options.seed)},
      {"tree_method", "hist"},
      {"nthread", "1"},
      {"verbosity", "0"},
  };
  for (const auto& p : params) {
    if (XGBoosterSetParam(b.h, p[0].c_str(), p[1].c_str()) != 0) {
      return Status::InvalidArgument(p[0] + ": " + LastError());
    }
  }
  for (int i = 0; i < options.rounds; ++i) {
    if (XGBoosterUpdateOneIter(b.h, i, d.h) != 0) return fail("XGBoosterUpdateOneIter");
  }
  return std::unique_ptr<XgboostSelector>(new XgboostSelector(b.Release(), ""));
}

XgboostSelector::~XgboostSelector() { XGBoosterFree(booster_); }

Status XgboostSelector::Save(const std::string& path) const {
  if (XGBoosterSaveModel(booster_, path.c_str()) != 0) {
    return Status::Unavailable(Quoted(path) + ": cannot save: " + LastError());
  }
  return Status::Ok();
}

StatusOr<std::vector<float>> XgboostSelector::Predict(const std::vector<float>& rows) const {
  if (rows.empty() || rows.size() % kSelectorFeatureCount != 0) {
    return Status::InvalidArgument("rows: expected a positive multiple of " +
                                   std::to_string(kSelectorFeatureCount) + " values, got " +
                                   std::to_string(rows.size()));
  }
  const std::string where = path_.empty() ? std::string("trained model") : Quoted(path_);
  const bst_ulong n = rows.size() / kSelectorFeatureCount;
  DMatrix d;
  if (XGDMatrixCreateFromMat(rows.data(), n, kSelectorFeatureCount,
                             std::numeric_limits<float>::quiet_NaN(), &d.h) != 0) {
    return Status::Internal(where + ": " + LastError());
  }
  const char* config =
      R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, "strict_shape": false})";
  const bst_ulong* shape = nullptr;
  bst_ulong dims = 0;
  const float* out = nullptr;
  if (XGBoosterPredictFromDMatrix(booster_, d.h, config, &shape, &dims, &out) != 0) {
    return Status::Internal(where + ": " + LastError());
  }
  bst_ulong size = 1;
  for (bst_ulong i = 0; i < dims; ++i) size *= shape[i];
  if (size != n * kSelectorClassCount) {
    return Status::Internal(where + ": expected " + std::to_string(n * kSelectorClassCount) +
                            " probabilities, got " + std::to_string(size));
  }
  return std::vector<float>(out, out + size);
}

StatusOr<std::vector<float>> XgboostSelector::Scores(const select::SelectorFeatures& features) {
  const auto v = select::FeatureVector(features);
  return Predict(std::vector<float>(v.begin(), v.end()));
}

}  // namespace star::op
