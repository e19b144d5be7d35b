// The two STAR kinds as the CRD tests see them: a complete valid example of each, how to
// keep TrainingJob's cross-field rules when one field changes, one violation per
// cross-field rule, and the C++ codec round trip.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "crd_model.h"
#include "star/core/status.h"

namespace star::crds {

// Decodes with the kind's C++ decoder and encodes the result with its ToJson.
using RoundTrip = std::function<StatusOr<nlohmann::json>(const nlohmann::json&)>;

struct Kind {
  KindModel model;
  RoundTrip round_trip;
};

Kind TrainingJobKind();
Kind NodeAllocationKind();
std::vector<Kind> AllKinds();

}  // namespace star::crds
