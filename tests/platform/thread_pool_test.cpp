#include "platform/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace g4 {
namespace {

// Every index in [0, n) is visited exactly once, by ranges that are disjoint and contiguous.
void expect_covers(ThreadPool& pool, int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int> calls{0};
  pool.parallel_for(n, [&](int64_t b, int64_t e, int t) {
    EXPECT_LT(b, e);
    EXPECT_GE(t, 0);
    EXPECT_LT(t, pool.size());
    calls.fetch_add(1);
    for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "index " << i << " of " << n;
  EXPECT_LE(calls.load(), pool.size());
}

TEST(ThreadPool, RangesCoverEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 4, 7, 64, 1001}) expect_covers(pool, n);
  }
}

// Back-to-back loops (the spinning hand-off) and loops after the workers went to sleep on the
// condition variable (gaps longer than the spin time) must both complete with the right sums.
TEST(ThreadPool, BackToBackAndAfterSleep) {
  ThreadPool pool(3);
  for (int round = 0; round < 2000; ++round) {
    std::atomic<int64_t> sum{0};
    pool.parallel_for(100, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
    });
    ASSERT_EQ(sum.load(), 4950) << "round " << round;
    if (round % 500 == 499) std::this_thread::sleep_for(std::chrono::microseconds(5 * ThreadPool::kSpinMicros));
  }
}

TEST(ThreadPool, RefusesZeroThreads) { EXPECT_THROW(ThreadPool(0), std::exception); }

TEST(ThreadPool, DestroysWhileWorkersSleepOrSpin) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(2);
    pool.parallel_for(10, [](int64_t, int64_t, int) {});
    if (i % 2) std::this_thread::sleep_for(std::chrono::microseconds(2 * ThreadPool::kSpinMicros));
  }
}

}  // namespace
}  // namespace g4
