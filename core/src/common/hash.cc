#include "star/core/common/hash.h"

namespace star {

uint32_t Fnv1a32(std::string_view data) {
  uint32_t h = 2166136261u;
  for (unsigned char c : data) h = (h ^ c) * 16777619u;
  return h;
}

uint64_t Fnv1a64(std::string_view data) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace star
