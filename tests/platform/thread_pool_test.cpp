#include "platform/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "platform/error.h"

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

// parallel_chunks: every unit exactly once, no chunk longer than asked, shares at whole chunks,
// and each thread walks its own contiguous share front to back (what keeps a memory-bound
// kernel's streams running on from chunk to chunk).
TEST(ThreadPool, ChunksCoverEveryUnitOnceAndWalkEachShareInOrder) {
  for (int threads : {1, 2, 3, 5})
    for (int64_t units : {1, 2, 3, 7, 64, 1001})
      for (auto [chunk, granule] : {std::pair<int64_t, int64_t>{1, 1}, {3, 1}, {100, 1}, {4, 2}, {6, 3}, {100, 4}}) {
        ThreadPool pool(threads);
        SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(units) + " units, chunk " +
                     std::to_string(chunk) + ", granule " + std::to_string(granule));
        std::vector<std::atomic<int>> hits(static_cast<size_t>(units));
        std::mutex mu;
        std::vector<std::vector<std::pair<int64_t, int64_t>>> calls(static_cast<size_t>(threads));
        pool.parallel_chunks(units, chunk, [&](int64_t b, int64_t e, int t) {
          ASSERT_LT(b, e);
          ASSERT_LE(e - b, chunk);
          ASSERT_EQ(b % granule, 0) << "piece [" << b << ", " << e << ")";
          ASSERT_TRUE(e % granule == 0 || e == units) << "piece [" << b << ", " << e << ")";
          for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
          std::lock_guard<std::mutex> lock(mu);
          calls[size_t(t)].emplace_back(b, e);
        }, granule);
        for (int64_t i = 0; i < units; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "unit " << i;
        for (int t = 0; t < threads; ++t) {
          const int64_t share_b = ThreadPool::share_begin(units, chunk, threads, t),
                        share_e = ThreadPool::share_begin(units, chunk, threads, t + 1);
          EXPECT_TRUE(share_b % chunk == 0 || share_b == units) << share_b;
          EXPECT_LE(share_b, share_e);
          // Even shares, rounded to whole chunks: none more than a chunk off units / threads.
          EXPECT_LE(std::abs(share_e - share_b - units / threads), chunk + 1);
          int64_t next = share_b;  // the owner's chunks of its share: consecutive, from the front
          for (auto [b, e] : calls[size_t(t)]) {
            if (b < share_b || b >= share_e) continue;  // taken from another thread's share
            EXPECT_EQ(b, next) << "thread " << t;
            next = e;
          }
        }
      }
}

// Pieces shrink as a share runs out, so threads meet at the join within about a granule: one
// thread walking 100 units (chunk 10) takes whole chunks while a quarter of what is left is at
// least a chunk, then ever smaller pieces, and its last piece is a single granule.
TEST(ThreadPool, PiecesShrinkTowardTheEndOfAShare) {
  ThreadPool pool(1);
  for (int64_t granule : {1, 2, 5}) {
    SCOPED_TRACE("granule " + std::to_string(granule));
    std::vector<int64_t> sizes;
    pool.parallel_chunks(100, 10, [&](int64_t b, int64_t e, int) { sizes.push_back(e - b); }, granule);
    ASSERT_GE(sizes.size(), 3u);
    EXPECT_EQ(sizes.front(), 10);
    for (size_t i = 1; i < sizes.size(); ++i) EXPECT_LE(sizes[i], sizes[i - 1]) << "piece " << i;
    EXPECT_EQ(sizes.back(), granule);
  }
}

// A thread held on its first chunk has the rest of its share taken from the back by the other,
// and still no unit runs twice or is skipped. Thread 1 waits (up to 10 s) until thread 0 has run
// a unit of share 1, so the outcome does not depend on how the threads are scheduled.
TEST(ThreadPool, ChunksOfASlowThreadAreTakenFromTheBack) {
  ThreadPool pool(2);
  const int64_t units = 100;
  std::vector<std::atomic<int>> by(static_cast<size_t>(units));
  for (auto& b : by) b.store(-1);
  std::atomic<bool> stolen{false};
  int64_t first_stolen = -1;  // written by thread 0 only, read after the join
  pool.parallel_chunks(units, 5, [&](int64_t b, int64_t e, int t) {
    if (t == 1) {
      const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!stolen.load() && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
    }
    if (t == 0 && b >= 50 && !stolen.exchange(true)) first_stolen = b;
    for (int64_t i = b; i < e; ++i) {
      const int before = by[size_t(i)].exchange(t);
      ASSERT_EQ(before, -1) << "unit " << i << " ran twice";
    }
  });
  for (int64_t i = 0; i < units; ++i) ASSERT_NE(by[size_t(i)].load(), -1) << "unit " << i << " skipped";
  EXPECT_TRUE(stolen.load()) << "thread 0 never took a chunk of thread 1's share";
  EXPECT_EQ(first_stolen, 95) << "thread 0 should take the back of thread 1's share first";
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(by[size_t(i)].load(), 0) << "unit " << i;
}

// A chunk below 1, more units than a share's 32-bit bounds hold, and a chunk that is not whole
// granules are refused with the numbers (before any unit runs).
TEST(ThreadPool, ChunksRefuseWhatTheyCannotSplit) {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  auto fn = [&](int64_t, int64_t, int) { ran.fetch_add(1); };
  for (auto [units, chunk] : {std::pair<int64_t, int64_t>{10, 0}, {10, -3}, {int64_t(1) << 32, 1}}) {
    try {
      pool.parallel_chunks(units, chunk, fn);
      ADD_FAILURE() << units << " units, chunk " << chunk << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(chunk < 1 ? chunk : units)), std::string::npos) << e.what();
    }
  }
  for (auto [chunk, granule] : {std::pair<int64_t, int64_t>{5, 2}, {4, 0}}) {
    try {
      pool.parallel_chunks(10, chunk, fn, granule);
      ADD_FAILURE() << "chunk " << chunk << " of granules " << granule << " accepted";
    } catch (const Error& e) {
      const std::string want = granule < 1 ? "granule must be >= 1, got " + std::to_string(granule)
                                           : "granules of " + std::to_string(granule);
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(ran.load(), 0);
}


// warm(): each worker reads its whole range when the caller leaves it time (the bytes count in
// warmed_bytes), the next parallel call still runs exactly once per index, and a range is read
// to its last byte even when its length is not a whole line.
TEST(ThreadPool, WarmReadsEachWorkersRangeAndTheNextCallRuns) {
  ThreadPool pool(3);
  std::vector<std::byte> bytes(1 << 20, std::byte{7});
  const std::vector<ThreadPool::WarmRange> ranges{{bytes.data(), 4096}, {bytes.data() + 8192, 100001}};
  for (int round = 0; round < 20; ++round) {
    const uint64_t before = pool.warmed_bytes();
    pool.warm(ranges);
    // Nothing else is posted, so the workers read to the end; wait for it (bounded: a loaded CI
    // host may not schedule them at once), then the count must be exact.
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (pool.warmed_bytes() - before < 4096u + 100001u && std::chrono::steady_clock::now() < limit)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(pool.warmed_bytes() - before, 4096u + 100001u) << "round " << round;
    expect_covers(pool, 1001);
  }
}

// A warm posted right before the next call is cut short, not waited for; warms, parallel_for and
// parallel_chunks interleave in any order (back to back and after the workers went to sleep)
// with every call's work done exactly once. (Run under TSan in CI: the posting protocol.)
TEST(ThreadPool, WarmInterleavesWithCallsInAnyOrder) {
  ThreadPool pool(2);
  std::vector<std::byte> big(std::size_t(64) << 20, std::byte{1});
  const std::vector<ThreadPool::WarmRange> whole{{big.data(), big.size()}};
  for (int round = 0; round < 300; ++round) {
    pool.warm(whole);
    if (round % 3 == 0) pool.warm(whole);  // twice in a row
    if (round % 100 == 99) std::this_thread::sleep_for(std::chrono::microseconds(3 * ThreadPool::kSpinMicros));
    std::atomic<int64_t> sum{0};
    if (round % 2)
      pool.parallel_for(100, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
      });
    else
      pool.parallel_chunks(100, 8, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
      });
    ASSERT_EQ(sum.load(), 4950) << "round " << round;
  }
  EXPECT_LT(pool.warmed_bytes(), uint64_t(400) * big.size());  // cut short: not 64 MiB per warm
}

TEST(ThreadPool, WarmChecksItsRangesAndIsANoOpWithoutWorkers) {
  ThreadPool pool(3);
  std::byte b{};
  const std::vector<ThreadPool::WarmRange> one{{&b, 1}};
  try {
    pool.warm(one);
    FAIL() << "expected g4::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 ranges for 2 workers"), std::string::npos) << e.what();
  }
  ThreadPool alone(1);
  alone.warm({});
  EXPECT_EQ(alone.warmed_bytes(), 0u);
  expect_covers(pool, 10);
}

// After stop_warm() no worker reads its range any more: the count stops moving, and the memory
// may be freed at once (ASan in CI would report a worker still reading it).
TEST(ThreadPool, StopWarmEndsEveryRead) {
  ThreadPool pool(3);
  for (int round = 0; round < 20; ++round) {
    auto big = std::make_unique<std::vector<std::byte>>(std::size_t(16) << 20, std::byte{5});
    const std::vector<ThreadPool::WarmRange> r{{big->data(), big->size()}, {big->data(), big->size()}};
    pool.warm(r);
    if (round % 2) std::this_thread::sleep_for(std::chrono::microseconds(100));
    pool.stop_warm();
    big.reset();
    const uint64_t after = pool.warmed_bytes();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(pool.warmed_bytes(), after) << "round " << round;
  }
  pool.stop_warm();  // nothing outstanding: returns at once
  expect_covers(pool, 64);
}

// Destroying a pool while a warm is posted (taken or not, read or not) neither hangs nor crashes.
TEST(ThreadPool, DestroysWithAWarmOutstanding) {
  std::vector<std::byte> bytes(std::size_t(4) << 20, std::byte{3});
  for (int i = 0; i < 30; ++i) {
    ThreadPool pool(2);
    const std::vector<ThreadPool::WarmRange> r{{bytes.data(), bytes.size()}};
    pool.warm(r);
    if (i % 2) std::this_thread::sleep_for(std::chrono::microseconds(2 * ThreadPool::kSpinMicros));
  }
}

}  // namespace
}  // namespace g4
