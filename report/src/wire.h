// Pieces of the wire contract (client.h) that both ends use.
#pragma once

#include <string>

namespace star::report::wire {

// {"error": message}, the body of every refusal.
std::string ErrorBody(const std::string& message);
// The "error" of a JSON error body, else the body itself.
std::string ErrorMessage(const std::string& body);

}  // namespace star::report::wire
