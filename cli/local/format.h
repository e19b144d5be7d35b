// Number formatting shared by `star local`'s messages, events and environment.
#pragma once

#include <cstdio>
#include <string>

namespace star::local {

// `v` with exactly `digits` decimals ("%.*f"): Fixed(2.5, 1) = "2.5", Fixed(0.75, 0) = "1".
inline std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace star::local
