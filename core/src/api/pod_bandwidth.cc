#include "star/core/api/pod_bandwidth.h"

#include <cmath>
#include <string_view>
#include <utility>

namespace star::api {

using nlohmann::json;

namespace {

// The multiplier of a quantity's suffix; 0 when it is not one of a bandwidth's.
double SuffixFactor(std::string_view s) {
  static constexpr std::pair<std::string_view, double> kSuffixes[] = {
      {"", 1},         {"k", 1e3},          {"M", 1e6},          {"G", 1e9},          {"T", 1e12},
      {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0}};
  for (const auto& [suffix, factor] : kSuffixes) {
    if (s == suffix) return factor;
  }
  return 0;
}

// "<digits>[.<digits>]" at the start of `s`: its value and length (0 when none).
std::pair<double, size_t> Decimal(std::string_view s) {
  size_t p = 0, digits = 0;
  bool dot = false;
  for (; p < s.size() && digits <= 18; ++p) {
    if (s[p] == '.' && !dot) {
      dot = true;
    } else if (s[p] >= '0' && s[p] <= '9') {
      ++digits;
    } else {
      break;
    }
  }
  if (digits == 0 || digits > 18) return {0, 0};
  return {std::stod(std::string(s.substr(0, p))), p};
}

}  // namespace

std::optional<int64_t> ParseBitsPerSecond(const json& quantity) {
  double bps = -1;
  if (quantity.is_number()) {
    bps = quantity.get<double>();
  } else if (quantity.is_string()) {
    const std::string_view s = quantity.get_ref<const std::string&>();
    const auto [value, length] = Decimal(s);
    const double factor = SuffixFactor(s.substr(length));
    if (length > 0 && factor > 0) bps = value * factor;
  }
  if (!std::isfinite(bps) || bps < 1 || bps > static_cast<double>(kMaxBitsPerSecond)) return std::nullopt;
  return std::llround(bps);
}

StatusOr<NetworkAllocation> PodBandwidth(const json& annotations, const std::string& path) {
  NetworkAllocation net;
  if (annotations.is_null()) return net;
  if (!annotations.is_object()) return Status::InvalidArgument(path + ": must be an object");
  for (auto [key, out] : {std::pair{kEgressBandwidthAnnotation, &net.egress_bits_per_second},
                          std::pair{kIngressBandwidthAnnotation, &net.ingress_bits_per_second}}) {
    auto it = annotations.find(key);
    if (it == annotations.end()) continue;
    const std::optional<int64_t> bps = it->is_string() ? ParseBitsPerSecond(*it) : std::nullopt;
    if (!bps) {
      return Status::InvalidArgument(path + "[\"" + key + "\"]: must be a bandwidth like \"800M\" or \"1G\" (bits per second, at least 1, at most " +
                                     std::to_string(kMaxBitsPerSecond) + "), got " + it->dump());
    }
    *out = *bps;
  }
  return net;
}

}  // namespace star::api
