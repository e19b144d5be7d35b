#include "star/agent/headroom.h"

#include <algorithm>
#include <cmath>

namespace star::agent {
namespace {

uint64_t Delta(uint64_t before, uint64_t after) { return after > before ? after - before : 0; }

bool Moved(double was, double is, double capacity, double change) {
  return capacity > 0 && std::abs(is - was) >= change * capacity;
}

}  // namespace

api::NodeHeadroom HeadroomBetween(const HostCounters& before, const HostCounters& after,
                                  const std::string& interface,
                                  double nic_capacity_bits_per_second,
                                  const std::string& sampled_at) {
  api::NodeHeadroom h;
  h.sampled_at = sampled_at;
  const double seconds = std::chrono::duration<double>(after.at - before.at).count();
  h.interval_seconds = std::max(seconds, 1e-3);
  h.cpu_capacity_millicores = 1000.0 * std::max(after.cpus, 1);
  const uint64_t total = Delta(before.cpu_total_ticks, after.cpu_total_ticks);
  const double busy = total == 0 ? 0
                                 : static_cast<double>(Delta(before.cpu_busy_ticks,
                                                             after.cpu_busy_ticks)) /
                                       static_cast<double>(total);
  h.cpu_used_millicores = std::min(busy, 1.0) * h.cpu_capacity_millicores;
  if (interface.empty()) return h;
  h.interface = interface;
  h.nic_capacity_bits_per_second = std::max(nic_capacity_bits_per_second, 0.0);
  h.egress_bits_per_second = 8.0 * static_cast<double>(Delta(before.tx_bytes, after.tx_bytes)) /
                             h.interval_seconds;
  h.ingress_bits_per_second = 8.0 * static_cast<double>(Delta(before.rx_bytes, after.rx_bytes)) /
                              h.interval_seconds;
  return h;
}

bool ShouldWriteHeadroom(const std::optional<api::NodeHeadroom>& written,
                         std::chrono::steady_clock::time_point written_at,
                         const api::NodeHeadroom& now, std::chrono::steady_clock::time_point t,
                         const HeadroomOptions& options) {
  if (!written) return true;
  const auto age = t - written_at;
  if (age < options.interval) return false;
  if (age >= options.refresh) return true;
  if (written->interface != now.interface ||
      written->cpu_capacity_millicores != now.cpu_capacity_millicores ||
      written->nic_capacity_bits_per_second != now.nic_capacity_bits_per_second) {
    return true;
  }
  const double nic = now.nic_capacity_bits_per_second;
  return Moved(written->cpu_used_millicores, now.cpu_used_millicores,
               now.cpu_capacity_millicores, options.change) ||
         Moved(written->egress_bits_per_second, now.egress_bits_per_second, nic, options.change) ||
         Moved(written->ingress_bits_per_second, now.ingress_bits_per_second, nic, options.change);
}

}  // namespace star::agent
