#include "store/store_auth.h"

#include "star/report/token.h"

namespace star::shim {

bool BearerMatches(const std::string& authorization, const std::string& token) {
  // The report endpoint's constant-time compare: the store takes the same job token.
  return report::TokensEqual(authorization, "Bearer " + token);
}

}  // namespace star::shim
