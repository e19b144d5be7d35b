// The learned selector a runtime (star-operator, `star local`, `star sim`) offers the
// control loops of its jobs: an XGBoost selector model (xgboost_selector.h) loaded from
// a file, where star was built with XGBoost (libxgboost found). Target
// star_operator_model, built either way.
#pragma once

#include <memory>
#include <string>

#include "star/core/select/learned.h"
#include "star/core/status.h"
#include "star/operator/control_loop.h"

namespace star::op {

// Whether this build can load a model (the XGBoost adapter is built).
[[nodiscard]] bool LearnedSelectorBuilt();

// The model file runtimes load when none is named: the installed one
// (<install prefix>/share/star/selector.json) where LearnedSelectorBuilt(), else "".
[[nodiscard]] std::string DefaultSelectorModelPath();

// Loads the selector model at `path`. Errors: FailedPrecondition "model file \"FILE\": this build
// has no XGBoost ..." when !LearnedSelectorBuilt(); InvalidArgument "no model file
// given" for ""; XgboostSelector::Load's (NotFound "model file \"FILE\": cannot open",
// InvalidArgument when it is not a selector model), each naming the file.
[[nodiscard]] StatusOr<std::shared_ptr<select::LearnedSelector>> LoadSelectorModel(
    const std::string& path);

// The LearnedModel of a load: its model, or none with the error's message as the reason
// (the loops' selector_fallback detail).
[[nodiscard]] LearnedModel LearnedModelOf(
    const StatusOr<std::shared_ptr<select::LearnedSelector>>& loaded);

}  // namespace star::op
