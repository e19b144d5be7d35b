// The agent's own bounds on the quantities it turns into kernel settings, and saturating
// arithmetic on them: whatever int64 a NodeAllocation, the journal or the kernel holds,
// no computation of the agent overflows (signed overflow is undefined behaviour).
#pragma once

#include <cstdint>
#include <limits>

namespace star::agent {

// The kernel's cap on a CFS quota, in microseconds (MAX_BW in kernel/sched/core.c).
inline constexpr int64_t kMaxQuotaUs = (int64_t{1} << 44) - 1;
// The largest CPU quota the agent applies to one pod: what the kernel holds at the
// longest period (1 s), about 17.6 million CPUs. The codec's own bound
// (api::Validate) is lower; this one keeps the agent safe whatever spec it is given.
inline constexpr int64_t kMaxQuotaMillicores = kMaxQuotaUs / 1000;

// a * b, clamped to [INT64_MIN, INT64_MAX] instead of overflowing.
constexpr int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (!__builtin_mul_overflow(a, b, &out)) return out;
  return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min()
                            : std::numeric_limits<int64_t>::max();
}

// a + b, clamped likewise.
constexpr int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (!__builtin_add_overflow(a, b, &out)) return out;
  return b < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
}

}  // namespace star::agent
