#include "star/core/api/node_headroom.h"

#include <algorithm>
#include <string>
#include <utility>

#include "star/core/api/json_reader.h"
#include "star/core/api/meta.h"

namespace star::api {

using nlohmann::json;

namespace {

constexpr double kMax = static_cast<double>(kMaxJsonInteger);
constexpr size_t kMaxInterfaceLength = 15;  // Linux's IFNAMSIZ less its NUL

// A non-negative number field within the JSON integer range.
void ReadAmount(ObjectReader& rd, std::string_view key, double* out, Need need) {
  rd.Number(key, out, need).AtLeast(key, *out, 0).AtMost(key, *out, kMax);
}

void ReadCpu(ObjectReader& rd, NodeHeadroom* h) {
  const json* c = rd.ok() ? rd.Get("cpu") : nullptr;
  if (c == nullptr) {
    if (rd.ok()) rd.Fail("cpu", "required field is missing");
    return;
  }
  ObjectReader cr(*c, rd.FieldPath("cpu"));
  ReadAmount(cr, "capacityMillicores", &h->cpu_capacity_millicores, Need::kRequired);
  cr.Greater("capacityMillicores", h->cpu_capacity_millicores, 0);
  ReadAmount(cr, "usedMillicores", &h->cpu_used_millicores, Need::kRequired);
  cr.RejectUnknown({"capacityMillicores", "usedMillicores"});
  rd.Merge(cr.status());
}

void ReadNetwork(ObjectReader& rd, NodeHeadroom* h) {
  const json* n = rd.ok() ? rd.Get("network") : nullptr;
  if (n == nullptr) return;
  ObjectReader nr(*n, rd.FieldPath("network"));
  nr.String("interface", &h->interface);
  if (nr.ok() && h->interface.empty()) nr.Fail("interface", "must not be empty");
  if (nr.ok() && h->interface.size() > kMaxInterfaceLength) {
    nr.Fail("interface", "must be at most " + std::to_string(kMaxInterfaceLength) +
                             " characters, got " + std::to_string(h->interface.size()));
  }
  ReadAmount(nr, "capacityBitsPerSecond", &h->nic_capacity_bits_per_second, Need::kOptional);
  ReadAmount(nr, "egressBitsPerSecond", &h->egress_bits_per_second, Need::kOptional);
  ReadAmount(nr, "ingressBitsPerSecond", &h->ingress_bits_per_second, Need::kOptional);
  nr.RejectUnknown(
      {"interface", "capacityBitsPerSecond", "egressBitsPerSecond", "ingressBitsPerSecond"});
  rd.Merge(nr.status());
}

}  // namespace

double CpuHeadroomMillicores(const NodeHeadroom& h) {
  return std::max(0.0, h.cpu_capacity_millicores - h.cpu_used_millicores);
}

std::optional<double> NicHeadroomBitsPerSecond(const NodeHeadroom& h) {
  if (h.nic_capacity_bits_per_second <= 0) return std::nullopt;
  const double busier = std::max(h.egress_bits_per_second, h.ingress_bits_per_second);
  return std::max(0.0, h.nic_capacity_bits_per_second - busier);
}

json ToJson(const NodeHeadroom& h) {
  json j = {{"sampledAt", h.sampled_at},
            {"intervalSeconds", h.interval_seconds},
            {"cpu",
             {{"capacityMillicores", h.cpu_capacity_millicores},
              {"usedMillicores", h.cpu_used_millicores}}}};
  if (!h.interface.empty()) {
    j["network"] = {{"interface", h.interface},
                    {"capacityBitsPerSecond", h.nic_capacity_bits_per_second},
                    {"egressBitsPerSecond", h.egress_bits_per_second},
                    {"ingressBitsPerSecond", h.ingress_bits_per_second}};
  }
  return j;
}

StatusOr<NodeHeadroom> NodeHeadroomFromJson(const json& j, const std::string& path) {
  NodeHeadroom h;
  ObjectReader rd(j, path);
  rd.String("sampledAt", &h.sampled_at);
  if (rd.ok() && !IsRfc3339(h.sampled_at)) {
    rd.Fail("sampledAt", "must be an RFC 3339 date-time, got \"" + h.sampled_at + "\"");
  }
  ReadAmount(rd, "intervalSeconds", &h.interval_seconds, Need::kRequired);
  rd.Greater("intervalSeconds", h.interval_seconds, 0);
  ReadCpu(rd, &h);
  ReadNetwork(rd, &h);
  rd.RejectUnknown({"sampledAt", "intervalSeconds", "cpu", "network"});
  if (!rd.ok()) return rd.status();
  return h;
}

}  // namespace star::api
