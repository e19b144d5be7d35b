// api::DecisionFromJson on any bytes. A decision it accepts must pass Validate and
// survive ToJson -> text -> DecisionFromJson unchanged.
#include "fuzz_support.h"
#include "star/core/api/decision.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace star;
  const nlohmann::json j = fuzz::ParseJson(data, size);
  if (j.is_discarded()) return 0;
  StatusOr<api::Decision> d = api::DecisionFromJson(j);
  if (!d.ok()) return 0;
  fuzz::Check(api::Validate(*d).ok(), "a decoded decision validates",
              api::Validate(*d).ToString());
  const nlohmann::json out = api::ToJson(*d);
  StatusOr<api::Decision> again = api::DecisionFromJson(fuzz::OverTheWire(out));
  fuzz::Check(again.ok(), "ToJson of a decoded decision decodes",
              again.status().ToString() + "\n" + out.dump());
  fuzz::Check(*again == *d, "decode(ToJson(d)) == d",
              out.dump() + "\n" + api::ToJson(*again).dump());
  return 0;
}
