#include "platform/heap_tuning.h"

#include <gtest/gtest.h>

#include <vector>

namespace g4 {

// glibc accepts the default (32 MiB) and refuses what it cannot honour; memory still works after.
TEST(HeapTuning, TakesEffectOnGlibcAndKeepsAllocationsWorking) {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_TRUE(keep_large_blocks_in_heap());
  EXPECT_FALSE(keep_large_blocks_in_heap(uint64_t(1) << 40));  // above glibc's limit: refused, not clamped silently
  EXPECT_TRUE(keep_large_blocks_in_heap());
#endif
  for (int round = 0; round < 3; ++round) {
    std::vector<float> big(size_t(6) << 20, float(round));  // 24 MiB
    EXPECT_EQ(big.back(), float(round));
  }
}

}  // namespace g4
