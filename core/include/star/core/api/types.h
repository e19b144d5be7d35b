// Enumerations shared by every component, with their wire spellings.
#pragma once

#include <optional>
#include <string_view>

namespace star::api {

enum class Architecture { kAllReduce, kParameterServer };
// Wire: "AllReduce", "ParameterServer".
std::string_view ToString(Architecture a);
std::optional<Architecture> ParseArchitecture(std::string_view s);

enum class SyncMode { kSsgd, kFixedK, kGroups, kAsgd };
// Wire (tool contracts, reports, metrics): "ssgd", "fixed_k", "groups", "asgd".
std::string_view ToString(SyncMode m);
std::optional<SyncMode> ParseSyncMode(std::string_view s);

enum class StragglerCause { kCompute, kCommunication };
// Wire: "compute", "communication".
std::string_view ToString(StragglerCause c);
std::optional<StragglerCause> ParseStragglerCause(std::string_view s);

enum class StragglerKind { kDynamic, kStatic };
// Wire: "dynamic", "static".
std::string_view ToString(StragglerKind k);
std::optional<StragglerKind> ParseStragglerKind(std::string_view s);

}  // namespace star::api
