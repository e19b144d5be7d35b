// FNV-1a: a small, stable, non-cryptographic hash for deriving short deterministic names
// (interface names, object hashes) from strings. The values never change between
// releases or machines, so a name derived from them can be found again by a restarted
// process.
#pragma once

#include <cstdint>
#include <string_view>

namespace star {

// 32-bit FNV-1a of the bytes of `data` (offset basis 2166136261, prime 16777619).
uint32_t Fnv1a32(std::string_view data);

// 64-bit FNV-1a of the bytes of `data` (offset basis 14695981039346656037,
// prime 1099511628211).
uint64_t Fnv1a64(std::string_view data);

}  // namespace star
