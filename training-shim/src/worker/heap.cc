#include "star/shim/heap.h"

#include <malloc.h>

namespace star::shim {

Status RetainFreedHeap() {
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit; setting it also turns
  // off glibc's own threshold adjustment, which is what unmaps new sizes.
  constexpr int kMmapThreshold = 32 << 20;
  constexpr int kTrimThreshold = 1 << 30;
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1) {
    return Status::Unavailable("mallopt(M_MMAP_THRESHOLD) refused: the heap keeps its defaults");
  }
  if (mallopt(M_TRIM_THRESHOLD, kTrimThreshold) != 1) {
    return Status::Unavailable("mallopt(M_TRIM_THRESHOLD) refused: the heap keeps its defaults");
  }
  return Status::Ok();
}

}  // namespace star::shim
