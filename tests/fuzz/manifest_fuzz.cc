// `star local JOB.yaml` (local::ParseManifest) on any bytes: YAML to JSON, the document
// picked, TrainingJobFromJson and the pod-template reads. A job it accepts validates like
// the CRD and survives ToJson -> TrainingJobFromJson unchanged; CPU amounts are >= 0.
// Its findings are in the seed corpus: text that is not UTF-8, and the text on which
// yaml-cpp 0.7's LoadAll never returns (ToJson now reads libyaml's events instead).
#include "fuzz_support.h"
#include "local/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace star;
  StatusOr<local::LocalJob> local = local::ParseManifest(fuzz::AsText(data, size), "fuzz.yaml");
  if (!local.ok()) return 0;
  fuzz::Check(api::Validate(local->job.spec).ok(), "an accepted spec validates",
              api::Validate(local->job.spec).ToString());
  fuzz::Check(local->worker_cpu_millicores >= 0 && local->server_cpu_millicores >= 0,
              "CPU millicores >= 0");
  const nlohmann::json out = api::ToJson(local->job);
  StatusOr<api::TrainingJob> again = api::TrainingJobFromJson(fuzz::OverTheWire(out));
  fuzz::Check(again.ok(), "ToJson of an accepted job decodes",
              again.status().ToString() + "\n" + out.dump());
  fuzz::Check(*again == local->job, "decode(ToJson(job)) == job",
              out.dump() + "\n" + api::ToJson(*again).dump());
  return 0;
}
