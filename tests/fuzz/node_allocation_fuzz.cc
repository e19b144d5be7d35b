// api::NodeAllocationFromJson on any bytes. An allocation it accepts must survive
// ToJson -> text -> NodeAllocationFromJson unchanged, and its spec must pass Validate.
#include "fuzz_support.h"
#include "star/core/api/node_allocation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace star;
  const nlohmann::json j = fuzz::ParseJson(data, size);
  if (j.is_discarded()) return 0;
  StatusOr<api::NodeAllocation> a = api::NodeAllocationFromJson(j);
  if (!a.ok()) return 0;
  fuzz::Check(api::Validate(a->spec).ok(), "a decoded spec validates",
              api::Validate(a->spec).ToString());
  const nlohmann::json out = api::ToJson(*a);
  StatusOr<api::NodeAllocation> again = api::NodeAllocationFromJson(fuzz::OverTheWire(out));
  fuzz::Check(again.ok(), "ToJson of a decoded allocation decodes",
              again.status().ToString() + "\n" + out.dump());
  fuzz::Check(*again == *a, "decode(ToJson(a)) == a",
              out.dump() + "\n" + api::ToJson(*again).dump());
  return 0;
}
