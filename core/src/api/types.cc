#include "star/core/api/types.h"

#include <array>
#include <utility>

namespace star::api {
namespace {

template <typename E, size_t N>
std::string_view Name(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [v, s] : table) {
    if (v == e) return s;
  }
  return "unknown";
}

template <typename E, size_t N>
std::optional<E> Parse(const std::array<std::pair<E, std::string_view>, N>& table,
                       std::string_view s) {
  for (const auto& [v, name] : table) {
    if (name == s) return v;
  }
  return std::nullopt;
}

constexpr std::array<std::pair<Architecture, std::string_view>, 2> kArch{{
    {Architecture::kAllReduce, "AllReduce"},
    {Architecture::kParameterServer, "ParameterServer"},
}};
constexpr std::array<std::pair<SyncMode, std::string_view>, 4> kMode{{
    {SyncMode::kSsgd, "ssgd"},
    {SyncMode::kFixedK, "fixed_k"},
    {SyncMode::kGroups, "groups"},
    {SyncMode::kAsgd, "asgd"},
}};
constexpr std::array<std::pair<StragglerCause, std::string_view>, 2> kCause{{
    {StragglerCause::kCompute, "compute"},
    {StragglerCause::kCommunication, "communication"},
}};
constexpr std::array<std::pair<StragglerKind, std::string_view>, 2> kKind{{
    {StragglerKind::kDynamic, "dynamic"},
    {StragglerKind::kStatic, "static"},
}};

}  // namespace

std::string_view ToString(Architecture a) { return Name(kArch, a); }
std::optional<Architecture> ParseArchitecture(std::string_view s) { return Parse(kArch, s); }
std::string_view ToString(SyncMode m) { return Name(kMode, m); }
std::optional<SyncMode> ParseSyncMode(std::string_view s) { return Parse(kMode, s); }
std::string_view ToString(StragglerCause c) { return Name(kCause, c); }
std::optional<StragglerCause> ParseStragglerCause(std::string_view s) { return Parse(kCause, s); }
std::string_view ToString(StragglerKind k) { return Name(kKind, k); }
std::optional<StragglerKind> ParseStragglerKind(std::string_view s) { return Parse(kKind, s); }

}  // namespace star::api
