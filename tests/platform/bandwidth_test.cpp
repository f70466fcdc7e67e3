#include "platform/bandwidth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "platform/device.h"
#include "platform/error.h"
#include "platform/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace g4 {

// Small buffer: this only checks the arithmetic and threading; `g4 device --bandwidth` measures.
TEST(Bandwidth, SmallBufferGivesAPositiveRate) {
  for (int threads : {1, 2}) {
    BandwidthResult r = measure_read_bandwidth({threads, 16u << 20, 2});
    EXPECT_GT(r.best_gb_per_s, 0.1) << threads;
    EXPECT_LT(r.best_gb_per_s, 1e5) << threads;  // a timing bug shows up as an absurd rate
    EXPECT_EQ(r.threads, threads);
    EXPECT_LE(r.buffer_bytes, 16u << 20);
    EXPECT_GT(r.buffer_bytes, 15u << 20);
  }
}

TEST(Bandwidth, RefusesZeroThreads) {
  try {
    measure_read_bandwidth({0, 1u << 20, 1});
    FAIL() << "expected g4::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("threads"), std::string::npos) << e.what();
  }
}

// The roofline method g4 bench uses, pinned: a "decode" that does nothing but stream the same
// bytes (its own AVX2 reader, written here) through the same pool, timed
// over several tokens right after a read pass, reaches 95-105% of the pass's tokens/s as the
// median of the paired runs. A pass that read the wrong bytes, or paired the wrong runs,
// would land outside.
#if defined(__x86_64__)
// The synthetic decode's reader: 128 bytes a step in four independent 32-byte chains.
__attribute__((target("avx2"))) uint64_t xor_words_avx2(const uint64_t* w, int64_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i)));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i + 12)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3)));
  return lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
}

TEST(ReadPass, ADecodeThatOnlyStreamsReadsReachesItsRoofline) {
  if (!host_cpu().isa.avx2) GTEST_SKIP() << "the synthetic decode reads with AVX2";
  constexpr int kRanges = 40;
  constexpr size_t kWords = (size_t(3) << 20) / 8;  // 3 MiB each, 120 MiB in all: past the caches
  std::vector<std::vector<uint64_t>> buffers(kRanges, std::vector<uint64_t>(kWords));
  std::vector<ReadRange> ranges;
  uint64_t want_bytes = 0;
  for (auto& b : buffers) {
    std::memset(b.data(), 0x3c, b.size() * 8);
    ranges.push_back({reinterpret_cast<const std::byte*>(b.data()), b.size() * 8 + 5});  // a ragged tail is not read
    want_bytes += b.size() * 8;
  }
  ThreadPool pool(2);
  std::atomic<uint64_t> sink{0};
  auto synthetic_decode_token = [&] {
    for (auto& b : buffers)
      pool.parallel_for(int64_t(b.size()) / 16, [&](int64_t begin, int64_t end, int) {
        sink.fetch_add(xor_words_avx2(b.data() + begin * 16, (end - begin) * 16), std::memory_order_relaxed);
      });
  };
  synthetic_decode_token();  // first touch
  // Finely paired (a host's load drifts over milliseconds to seconds): each token right after
  // its own pass, the ratio of the two times; the median of many pairs.
  std::vector<double> ratios;
  for (int run = 0; run < 41; ++run) {
    uint64_t bytes = 0;
    const double pass_s = time_read_pass(ranges, pool, 1, 0, &bytes);
    ASSERT_EQ(bytes, want_bytes);
    const auto t0 = std::chrono::steady_clock::now();
    synthetic_decode_token();
    const double token_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ratios.push_back(pass_s / token_s);  // the token's tokens/s against the pass's 1 / pass_s
  }
  std::sort(ratios.begin(), ratios.end());
  const double median = ratios[ratios.size() / 2];
  EXPECT_GT(median, 0.95) << "median " << median << " runs " << ratios.front() << " .. " << ratios.back();
  EXPECT_LT(median, 1.05) << "runs " << ratios.front() << " .. " << ratios.back();
  EXPECT_THROW(time_read_pass(ranges, pool, 0, 0), Error);
}

#endif  // __x86_64__

}  // namespace g4
