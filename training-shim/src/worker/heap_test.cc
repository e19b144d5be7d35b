#include "star/shim/heap.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#if defined(__SANITIZE_ADDRESS__)
#define STAR_OWN_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STAR_OWN_MALLOC 1
#endif
#endif

namespace star::shim {
namespace {

#ifdef STAR_OWN_MALLOC
// AddressSanitizer's malloc refuses mallopt: the call reports it.
TEST(RetainFreedHeap, IsRefusedWithoutGlibcMalloc) {
  const Status s = RetainFreedHeap();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("mallopt"), std::string::npos) << s.message();
}
#else
TEST(RetainFreedHeap, KeepsAFreedBlockInTheHeap) {
  ASSERT_TRUE(RetainFreedHeap().ok());
  // 24 MiB: mapped afresh (or trimmed off the heap's top on free) under glibc's defaults.
  constexpr size_t kSize = 24u << 20;
  const struct mallinfo2 before = mallinfo2();
  void* block = std::malloc(kSize);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kSize);
  const struct mallinfo2 held = mallinfo2();
  EXPECT_EQ(held.hblks, before.hblks) << "the block was mapped, not taken from the heap";
  std::free(block);
  const struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.arena, before.arena + kSize) << "the heap gave the freed block back";
  EXPECT_GE(after.fordblks, kSize);
}
#endif

}  // namespace
}  // namespace star::shim
