// A TrainingJob manifest, read for `star local`: the job validated exactly like the CRD,
// plus what the local runtime needs from its pod templates.
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
  // workers.template.spec.containers[0]: command + args concatenated; empty = run the
  // bundled Fashion-MNIST example. args without a command is an error (there is no image
  // entrypoint to pass them to).
  std::vector<std::string> worker_command;
  // containers[0].env name/value pairs, in order (value absent = ""). valueFrom and
  // envFrom are errors: there is no Kubernetes to resolve them.
  std::vector<std::pair<std::string, std::string>> worker_env;
  // containers[0].resources.limits.cpu in millicores (rounded up like Kubernetes), else
  // requests.cpu, else 0 (= not given: the runtime picks a share of the machine); a 0
  // quantity counts as not given. Same for the parameter-server template.
  int64_t worker_cpu_millicores = 0;
  int64_t server_cpu_millicores = 0;
};

// Reads ONE TrainingJob: the file's only document, or in a multi-document file the single
// document whose kind is TrainingJob (none or several -> error). The document is decoded
// by api::TrainingJobFromJson. Errors are InvalidArgument prefixed with the file name:
//   "job.yaml: spec.workers.replicas: must be >= 1, got 0"
//   "job.yaml:3:5: <libyaml's parse error>"
//   "job.yaml: spec.workers.template.spec.containers[0].env[1].valueFrom: not supported ..."
// LoadManifest adds "job.yaml: cannot read: <strerror>" (NotFound when the file does not
// exist, InvalidArgument otherwise, e.g. a directory; files over 16 MiB are refused).
StatusOr<LocalJob> LoadManifest(const std::string& path);
StatusOr<LocalJob> ParseManifest(std::string_view yaml_text, const std::string& name_for_errors);

}  // namespace star::local
