// YAML <-> JSON for the emulator: CRD files, server-side-apply bodies and the kubeconfig.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::apiserver {

// Every non-empty document of a YAML stream (a JSON text is a YAML document too), with
// plain scalars resolved like the YAML 1.2 core schema (null, true/false, integers,
// floats; everything else, every quoted scalar and plain scalars over 256 characters,
// is a string). InvalidArgument names the line of a syntax error; also for nesting
// deeper than kMaxDepth (request_limits.h) and for aliases that would expand the
// documents beyond their length in nodes plus 1000.
StatusOr<std::vector<nlohmann::json>> ParseYamlDocuments(const std::string& text);

// The same for text that must hold exactly one document.
StatusOr<nlohmann::json> ParseYamlDocument(const std::string& text);

// Block-style YAML for `value` (used for the kubeconfig the emulator writes).
std::string ToYaml(const nlohmann::json& value);

}  // namespace star::apiserver
