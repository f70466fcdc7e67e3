#include "platform/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "platform/device.h"
#include "platform/error.h"
#include "platform/huge_pages.h"
#include "platform/thread_pool.h"
#include "platform/threads_together.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "platform/target_attributes.h"
#endif

namespace g4 {
namespace {

constexpr uint64_t kDefaultBufferBytes = 256ull << 20;
constexpr size_t kAlignment = 64;

// Every pass folds what it read into this global, so the compiler cannot drop the loads.
std::atomic<uint64_t> g_read_sink{0};

// One 8-byte word through memcpy: read-pass ranges need not be 8-byte aligned (an int8 KV cache's
// scales start on 4-byte boundaries), and a misaligned uint64_t load is undefined behaviour.
inline uint64_t load_word(const uint64_t* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

uint64_t read_slice_portable(const uint64_t* words, size_t count) {
  uint64_t acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    for (int lane = 0; lane < 8; ++lane) acc[lane] ^= load_word(words + i + lane);
  for (; i < count; ++i) acc[0] ^= load_word(words + i);
  uint64_t folded = 0;
  for (uint64_t a : acc) folded ^= a;
  return folded;
}

#if defined(__x86_64__)
// Wide loads with four independent chains: one core keeps enough reads in flight to be
// limited by memory, not by the loop. The slice is read as `streams` contiguous parts advanced
// together, 128 bytes each per step (a core's hardware prefetcher tracks several streams at once,
// and on Intel cores 8 streams read more than one); prefetch_bytes > 0 also requests each
// stream's bytes that far ahead with software prefetch, as decode's int8 kernel does on Intel.
G4_TARGET_AVX2 uint64_t read_slice_avx2(const uint64_t* words, size_t count, int streams, size_t prefetch_bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  const size_t part = count / size_t(streams) / 16 * 16;  // words per stream, whole 128-byte steps
  if (streams == 1 && prefetch_bytes == 0) {  // the plain loop: no per-step stream or prefetch logic
    for (size_t i = 0; i < part; i += 16) {
      a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + i)));
      a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + i + 4)));
      a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + i + 8)));
      a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + i + 12)));
    }
  } else {
  for (size_t i = 0; i < part; i += 16)
    for (int s = 0; s < streams; ++s) {
      const uint64_t* p = words + size_t(s) * part + i;
      if (prefetch_bytes) {
        _mm_prefetch(reinterpret_cast<const char*>(p) + prefetch_bytes, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p) + prefetch_bytes + 64, _MM_HINT_T0);
      }
      a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4)));
      a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8)));
      a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 12)));
    }
  }
  const size_t done = part * size_t(streams);
  __m256i all = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), all);
  return lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3] ^ read_slice_portable(words + done, count - done);
}
#endif

}  // namespace

BandwidthResult measure_read_bandwidth(const BandwidthOptions& options) {
  using Clock = std::chrono::steady_clock;
  auto started = Clock::now();
  if (options.threads < 1) throw Error("bandwidth: threads must be >= 1, got " + std::to_string(options.threads));
  if (options.repetitions < 1)
    throw Error("bandwidth: repetitions must be >= 1, got " + std::to_string(options.repetitions));

  uint64_t bytes = options.buffer_bytes;
  if (bytes == 0) bytes = kDefaultBufferBytes;
  bytes = std::max<uint64_t>(bytes / (kAlignment * options.threads) * (kAlignment * options.threads),
                             kAlignment * uint64_t(options.threads));
  // Huge pages: page faults dominate the first touch (more so in a VM), and the weights the
  // roofline is compared with live in huge pages too (weight_placement.h).
  HugePageBuffer mapping(bytes);
  uint64_t* const words = reinterpret_cast<uint64_t*>(mapping.data());
  std::memset(words, 0x5a, bytes);  // first touch outside the timed passes

  bool wide = false;
#if defined(__x86_64__)
  wide = host_cpu().isa.avx2;
#endif
  const size_t words_per_thread = bytes / 8 / size_t(options.threads);
  // Passes cycle through three ways to read (one stream; eight streams; one stream with
  // software prefetch 8 KiB ahead) and the best pass counts, so the roofline is never below what
  // one of our kernels can read: on Intel cores eight streams per thread read more than one, and
  // decode's int8 kernel prefetches there (ops::plan_decode_streaming).
  auto read_slice = [&](int t, int streams, size_t prefetch_bytes) {
    const uint64_t* slice = words + size_t(t) * words_per_thread;
#if defined(__x86_64__)
    if (wide) return read_slice_avx2(slice, words_per_thread, streams, prefetch_bytes);
#endif
    (void)streams;
    (void)prefetch_bytes;
    return read_slice_portable(slice, words_per_thread);
  };

  double best_seconds = 1e30;
  for (int rep = 0; rep < options.repetitions; ++rep) {
    const int streams = rep % 3 == 1 ? 8 : 1;
    const size_t prefetch_bytes = rep % 3 == 2 ? size_t(8) << 10 : 0;
    const double seconds = time_threads_together(options.threads, [&](int t) {
      g_read_sink.fetch_xor(read_slice(t, streams, prefetch_bytes), std::memory_order_relaxed);
    });
    best_seconds = std::min(best_seconds, seconds);
  }
  (void)wide;

  BandwidthResult result;
  result.buffer_bytes = words_per_thread * 8 * uint64_t(options.threads);
  result.threads = options.threads;
  result.repetitions = options.repetitions;
  result.best_gb_per_s = double(result.buffer_bytes) / std::max(best_seconds, 1e-9) / 1e9;
  result.seconds_total = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

double time_read_pass(std::span<const ReadRange> ranges, ThreadPool& pool, int streams, uint64_t prefetch_bytes,
                      uint64_t* bytes_read) {
  if (streams < 1) throw Error("read pass: streams must be >= 1, got " + std::to_string(streams));
  bool wide = false;
#if defined(__x86_64__)
  wide = host_cpu().isa.avx2;
#endif
  uint64_t total = 0;
  std::atomic<uint64_t> sink{0};
  const auto t0 = std::chrono::steady_clock::now();
  for (const ReadRange& r : ranges) {
    const auto* words = reinterpret_cast<const uint64_t*>(r.data);  // loads are unaligned
    const int64_t n = int64_t(r.bytes / 8);
    total += uint64_t(n) * 8;
    pool.parallel_for(n, [&](int64_t begin, int64_t end, int) {
      uint64_t folded = 0;
#if defined(__x86_64__)
      if (wide) folded = read_slice_avx2(words + begin, size_t(end - begin), streams, prefetch_bytes);
#endif
      if (!wide) folded = read_slice_portable(words + begin, size_t(end - begin));
      sink.fetch_xor(folded, std::memory_order_relaxed);
    });
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g_read_sink.fetch_xor(sink.load(), std::memory_order_relaxed);
  if (bytes_read) *bytes_read = total;
  return seconds;
}

}  // namespace g4
