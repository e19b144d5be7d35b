#include "star/core/api/types.h"

#include "api/enum_table.h"

namespace star::api {
namespace {

constexpr internal::EnumTable<Architecture, 2> kArch{{
    {Architecture::kAllReduce, "AllReduce"},
    {Architecture::kParameterServer, "ParameterServer"},
}};
constexpr internal::EnumTable<SyncMode, 4> kMode{{
    {SyncMode::kSsgd, "ssgd"},
    {SyncMode::kFixedK, "fixed_k"},
    {SyncMode::kGroups, "groups"},
    {SyncMode::kAsgd, "asgd"},
}};
constexpr internal::EnumTable<StragglerCause, 2> kCause{{
    {StragglerCause::kCompute, "compute"},
    {StragglerCause::kCommunication, "communication"},
}};
constexpr internal::EnumTable<StragglerKind, 2> kKind{{
    {StragglerKind::kDynamic, "dynamic"},
    {StragglerKind::kStatic, "static"},
}};

}  // namespace

std::string_view ToString(Architecture a) { return internal::EnumName(kArch, a); }
std::optional<Architecture> ParseArchitecture(std::string_view s) { return internal::EnumParse(kArch, s); }
std::string_view ToString(SyncMode m) { return internal::EnumName(kMode, m); }
std::optional<SyncMode> ParseSyncMode(std::string_view s) { return internal::EnumParse(kMode, s); }
std::string_view ToString(StragglerCause c) { return internal::EnumName(kCause, c); }
std::optional<StragglerCause> ParseStragglerCause(std::string_view s) { return internal::EnumParse(kCause, s); }
std::string_view ToString(StragglerKind k) { return internal::EnumName(kKind, k); }
std::optional<StragglerKind> ParseStragglerKind(std::string_view s) { return internal::EnumParse(kKind, s); }

}  // namespace star::api
