// api::TrainingJobFromJson on any bytes. A job it accepts must survive ToJson -> text ->
// TrainingJobFromJson unchanged (training_job.h: FromJson(ToJson(s)) == s for any valid
// struct), and its spec must pass Validate.
#include "fuzz_support.h"
#include "star/core/api/training_job.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace star;
  const nlohmann::json j = fuzz::ParseJson(data, size);
  if (j.is_discarded()) return 0;
  StatusOr<api::TrainingJob> job = api::TrainingJobFromJson(j);
  if (!job.ok()) return 0;
  fuzz::Check(api::Validate(job->spec).ok(), "a decoded spec validates",
              api::Validate(job->spec).ToString());
  const nlohmann::json out = api::ToJson(*job);
  StatusOr<api::TrainingJob> again = api::TrainingJobFromJson(fuzz::OverTheWire(out));
  fuzz::Check(again.ok(), "ToJson of a decoded job decodes",
              again.status().ToString() + "\n" + out.dump());
  fuzz::Check(*again == *job, "decode(ToJson(job)) == job",
              out.dump() + "\n" + api::ToJson(*again).dump());
  return 0;
}
