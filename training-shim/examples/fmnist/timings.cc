#include "timings.h"

#include <algorithm>
#include <fstream>

namespace star::fmnist {

Status WriteTimingCsv(const std::string& path, const std::vector<IterationTiming>& t) {
  std::ofstream csv(path);
  csv << "iteration,compute_seconds,exchange_seconds,batch,amp\n";
  for (size_t i = 0; i < t.size(); ++i) {
    csv << i << ',' << t[i].compute << ',' << t[i].exchange << ',' << t[i].batch << ','
        << (t[i].amp ? 1 : 0) << '\n';
  }
  if (!csv) return Status::Unavailable("--timing-csv " + path + ": write failed");
  return Status::Ok();
}

ComputeSummary SummarizeCompute(const std::vector<IterationTiming>& t) {
  std::vector<double> compute;
  for (size_t i = std::min<size_t>(10, t.size() / 2); i < t.size(); ++i) compute.push_back(t[i].compute);
  ComputeSummary s;
  if (compute.empty()) return s;
  double sum = 0;
  for (double c : compute) sum += c;
  const auto mid = compute.begin() + static_cast<std::ptrdiff_t>(compute.size() / 2);
  std::nth_element(compute.begin(), mid, compute.end());
  s.mean_ms = 1e3 * sum / static_cast<double>(compute.size());
  s.median_ms = 1e3 * *mid;
  return s;
}

}  // namespace star::fmnist
