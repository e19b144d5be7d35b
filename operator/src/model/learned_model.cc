#include "star/operator/learned_model.h"

#ifdef STAR_HAVE_XGBOOST
#include "star/operator/xgboost_selector.h"
#endif

namespace star::op {

bool LearnedSelectorBuilt() {
#ifdef STAR_HAVE_XGBOOST
  return true;
#else
  return false;
#endif
}

std::string DefaultSelectorModelPath() {
#if defined(STAR_HAVE_XGBOOST) && defined(STAR_DEFAULT_SELECTOR_MODEL)
  return STAR_DEFAULT_SELECTOR_MODEL;
#else
  return "";
#endif
}

StatusOr<std::shared_ptr<select::LearnedSelector>> LoadSelectorModel(const std::string& path) {
#ifdef STAR_HAVE_XGBOOST
  if (path.empty()) return Status::InvalidArgument("no model file given");
  StatusOr<std::unique_ptr<XgboostSelector>> model = XgboostSelector::Load(path);
  if (!model.ok()) return model.status();
  return std::shared_ptr<select::LearnedSelector>(std::move(model).value());
#else
  const std::string what = path.empty() ? "no model file given" : "model file \"" + path + "\"";
  return Status::FailedPrecondition(what + ": this build has no XGBoost (libxgboost was not found)");
#endif
}

LearnedModel LearnedModelOf(const StatusOr<std::shared_ptr<select::LearnedSelector>>& loaded) {
  if (loaded.ok()) return {loaded.value(), ""};
  return {nullptr, loaded.status().message()};
}

}  // namespace star::op
