// `star local --inject SPEC` (local::ParseInjection) on any bytes, one SPEC per line,
// with the value parsers of the same header (ParseDuration, ParseRate, ParseCpuQuantity)
// on each line and ValidateInjections over the accepted SPECs. What they accept keeps
// the ranges inject_spec.h documents.
#include <cmath>
#include <vector>

#include "fuzz_support.h"
#include "local/inject_spec.h"

namespace {

void CheckInjection(const star::local::Injection& in) {
  using star::fuzz::Check;
  using star::local::InjectionKind;
  Check(in.worker >= 0, "worker >= 0", in.text);
  Check(std::isfinite(in.start_seconds) && in.start_seconds >= 0, "start finite and >= 0", in.text);
  if (in.end_seconds) {
    Check(std::isfinite(*in.end_seconds) && *in.end_seconds > in.start_seconds,
          "end finite and > start", in.text);
  }
  Check(!in.peer || in.kind == InjectionKind::kBandwidth || in.kind == InjectionKind::kDelay,
        "peer only with bandwidth or delay", in.text);
  switch (in.kind) {
    case InjectionKind::kCpu:
      Check(in.cpu_fraction > 0 && in.cpu_fraction <= 1, "cpu in (0, 1]", in.text);
      break;
    case InjectionKind::kNeighbor:
      Check(in.neighbor_threads >= 1 && in.neighbor_threads <= 64, "neighbor in [1, 64]", in.text);
      Check(in.neighbor_guarantee_cpus >= 0 && std::isfinite(in.neighbor_guarantee_cpus),
            "guarantee finite and >= 0", in.text);
      break;
    case InjectionKind::kBandwidth:
      Check(in.bandwidth_bps >= 8000 && in.bandwidth_bps <= 1'000'000'000'000'000,
            "bandwidth in [8000, 1e15]", in.text);
      if (in.peer) {
        Check(*in.peer >= 0 && *in.peer != in.worker, "peer >= 0 and not the worker", in.text);
        Check(in.bandwidth_bps < in.link_bps, "a peer link's rate below the uplink's", in.text);
      }
      break;
    case InjectionKind::kDelay:
      Check(in.delay_seconds > 0 && in.delay_seconds <= 10, "delay in (0, 10]", in.text);
      if (in.peer) {
        Check(*in.peer >= 0 && *in.peer != in.worker, "peer >= 0 and not the worker", in.text);
        Check(in.start_seconds == 0 && !in.end_seconds, "a delay with peer for the whole run", in.text);
      }
      break;
    case InjectionKind::kBwNeighbor:
      Check(in.bwneighbor_bps >= 8000 && in.bwneighbor_bps < in.link_bps, "bwneighbor in [8000, link)", in.text);
      Check(in.bwneighbor_guarantee_bps >= 0 && in.bwneighbor_guarantee_bps <= in.bwneighbor_bps,
            "guarantee in [0, bwneighbor]", in.text);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace star;
  std::string_view text = fuzz::AsText(data, size);
  std::vector<local::Injection> accepted;
  while (true) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);

    StatusOr<local::Injection> in = local::ParseInjection(line);
    if (in.ok()) {
      fuzz::Check(in->text == line, "text is the SPEC as given", in->text);
      CheckInjection(*in);
      accepted.push_back(*std::move(in));
    }
    if (StatusOr<double> d = local::ParseDuration(line); d.ok()) {
      fuzz::Check(std::isfinite(*d) && *d >= 0, "a duration is finite and >= 0", std::string(line));
    }
    if (StatusOr<int64_t> r = local::ParseRate(line); r.ok()) {
      fuzz::Check(*r >= 0 && *r <= 1'000'000'000'000'000, "a rate is in [0, 1e15]", std::string(line));
    }
    if (StatusOr<int64_t> c = local::ParseCpuQuantity(line); c.ok()) {
      fuzz::Check(*c > 0 && *c <= 1'000'000'000'000, "a CPU quantity is in (0, 1e12]",
                  std::string(line));
    }
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  for (int workers : {1, 4}) {
    (void)local::ValidateInjections(accepted, workers);
  }
  return 0;
}
