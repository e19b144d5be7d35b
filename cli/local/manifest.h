// A TrainingJob manifest, read for `star local`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/training_job.h"
#include "star/core/status.h"

namespace star::local {

// What `star local` needs from a TrainingJob manifest.
struct LocalJob {
  api::TrainingJob job;  // validated like the CRD (api::TrainingJobFromJson)
  // workers.template.spec.containers[0]: command + args; empty = the bundled trainer.
  std::vector<std::string> worker_command;
  // containers[0].env name/value pairs (valueFrom is not supported locally: an error).
  std::vector<std::pair<std::string, std::string>> worker_env;
  // containers[0].resources.limits.cpu in millicores, else requests.cpu, else 0 (not
  // given: the runtime picks a share of the machine). Same for the server template.
  int64_t worker_cpu_millicores = 0;
  int64_t server_cpu_millicores = 0;
};

// YAML (any YAML, JSON included) -> JSON: quoted scalars stay strings; plain scalars that
// read as an integer, a number, true/false or null/~ become those; everything else is a
// string. InvalidArgument "<name>:<line>:<column>: <yaml-cpp's message>" on a parse error.
StatusOr<nlohmann::json> YamlToJson(std::string_view text, const std::string& name_for_errors);

// Reads ONE TrainingJob: the file's single document, or in a multi-document file the
// single document whose kind is TrainingJob. Errors are prefixed with the file name:
// "job.yaml: spec.workers.replicas: must be >= 1, got 0", "job.yaml:3:5: ...",
// "job.yaml: cannot read: No such file or directory".
StatusOr<LocalJob> LoadManifest(const std::string& path);
StatusOr<LocalJob> ParseManifest(std::string_view yaml_text, const std::string& name_for_errors);

}  // namespace star::local
