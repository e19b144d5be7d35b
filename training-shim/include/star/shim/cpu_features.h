// What this CPU can do natively, for choices that depend on it (bf16 mixed precision).
#pragma once

namespace star::shim {

// Whether this CPU has native bf16 (AVX512-BF16 or AMX-BF16), from /proc/cpuinfo's
// flags. Without it bf16 autocast on the CPU is emulated and slower than fp32. Thread-safe.
bool CpuHasNativeBf16();

}  // namespace star::shim
