// api::WorkerReportFromJson on any bytes. A report it accepts must survive ToJson ->
// text -> WorkerReportFromJson unchanged (compared by their JSON: the struct has no ==).
#include "fuzz_support.h"
#include "star/core/api/worker_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace star;
  const nlohmann::json j = fuzz::ParseJson(data, size);
  if (j.is_discarded()) return 0;
  StatusOr<api::WorkerReport> r = api::WorkerReportFromJson(j);
  if (!r.ok()) return 0;
  const nlohmann::json out = api::ToJson(*r);
  StatusOr<api::WorkerReport> again = api::WorkerReportFromJson(fuzz::OverTheWire(out));
  fuzz::Check(again.ok(), "ToJson of a decoded report decodes",
              again.status().ToString() + "\n" + out.dump());
  fuzz::Check(api::ToJson(*again) == out, "decode(ToJson(r)) == r",
              out.dump() + "\n" + api::ToJson(*again).dump());
  return 0;
}
