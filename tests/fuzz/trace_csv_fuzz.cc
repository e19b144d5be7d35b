// cli::ParseTraceCsv (`star detect --trace`) on any bytes. Samples it returns keep the
// contract of trace_csv.h: iteration >= 0, worker in [0, 1000000], finite non-negative
// times, and per worker iterations that never decrease.
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "fuzz_support.h"
#include "trace_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace star;
  std::istringstream in{std::string(fuzz::AsText(data, size))};
  StatusOr<std::vector<detect::Sample>> samples = cli::ParseTraceCsv(in, "fuzz.csv");
  if (!samples.ok()) return 0;
  fuzz::Check(!samples->empty(), "an accepted trace has rows");
  std::unordered_map<int, int64_t> last;
  for (const detect::Sample& s : *samples) {
    fuzz::Check(s.iteration >= 0, "iteration >= 0");
    fuzz::Check(s.worker >= 0 && s.worker <= 1'000'000, "worker in [0, 1000000]");
    fuzz::Check(std::isfinite(s.compute_seconds) && s.compute_seconds >= 0,
                "compute_seconds finite and >= 0");
    fuzz::Check(std::isfinite(s.communication_seconds) && s.communication_seconds >= 0,
                "communication_seconds finite and >= 0");
    auto [it, inserted] = last.try_emplace(s.worker, s.iteration);
    fuzz::Check(inserted || it->second <= s.iteration, "iterations never decrease per worker");
    it->second = s.iteration;
  }
  return 0;
}
