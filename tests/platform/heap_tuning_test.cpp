#include "platform/heap_tuning.h"

#include <gtest/gtest.h>

#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace g4 {

// glibc accepts the default (32 MiB) and refuses what it cannot honour; memory still works after.
TEST(HeapTuning, TakesEffectOnGlibcAndKeepsAllocationsWorking) {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_TRUE(keep_large_blocks_in_heap());
  EXPECT_FALSE(keep_large_blocks_in_heap(uint64_t(1) << 40));  // above glibc's limit: refused, not clamped silently
  EXPECT_FALSE(keep_large_blocks_in_heap(uint64_t(1) << 20, uint64_t(1) << 40));  // a trim threshold past an int too
  EXPECT_TRUE(keep_large_blocks_in_heap());
#endif
  for (int round = 0; round < 3; ++round) {
    std::vector<float> big(size_t(6) << 20, float(round));  // 24 MiB
    EXPECT_EQ(big.back(), float(round));
  }
}

// A step's buffers freed together stay at the heap's top for the next step (no trim, so no fresh
// pages for the kernel to zero): after three 24 MiB blocks are freed the heap still spans them.
TEST(HeapTuning, FreedStepBuffersStayInTheHeap) {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  ASSERT_TRUE(keep_large_blocks_in_heap());
  {
    std::vector<std::vector<float>> step;
    step.reserve(3);  // no small block between the big ones
    for (int i = 0; i < 3; ++i) step.emplace_back(size_t(6) << 20, 1.0f);
  }
  EXPECT_GE(mallinfo2().arena, size_t(72) << 20);
#else
  GTEST_SKIP() << "glibc's heap only, without a sanitizer's allocator";
#endif
}

}  // namespace g4
