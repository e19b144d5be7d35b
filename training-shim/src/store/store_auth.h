// Bearer-token checks for the store server.
#pragma once

#include <string>

namespace star::shim {

// True when `authorization` (the request's Authorization header, "" if absent) is exactly
// "Bearer <token>". The comparison takes the same time whatever the header holds
// (report::TokensEqual), so a wrong guess tells nothing about the token. Thread-safe.
bool BearerMatches(const std::string& authorization, const std::string& token);

}  // namespace star::shim
