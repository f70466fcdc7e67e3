// Memory-read bandwidth measured by a short streaming loop. Decode reads every weight once per
// token, so tokens/s <= this figure / weight bytes per token: the ceiling `g4 bench` compares to.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace g4 {

struct BandwidthOptions {
  int threads = 1;
  // 0: 256 MiB, beyond the L3 slice of any current CPU die (cpuid often reports the socket-wide
  // L3, which a VM's few cores do not get), and small enough that first touch plus passes stay
  // under a second.
  uint64_t buffer_bytes = 0;
  // The best pass is reported (the others lost time to the scheduler). Passes cycle through one
  // stream per thread, eight streams per thread, and one stream with software prefetch 8 KiB
  // ahead, so with >= 3 the figure is the best of the three ways to read.
  int repetitions = 3;
};

struct BandwidthResult {
  double best_gb_per_s = 0;  // 1e9 bytes per second
  uint64_t buffer_bytes = 0;
  int threads = 0;
  int repetitions = 0;
  double seconds_total = 0;  // including allocation and first touch
};

// Throws g4::Error when the buffer cannot be allocated or threads < 1.
BandwidthResult measure_read_bandwidth(const BandwidthOptions& options);

class ThreadPool;

// A range of memory one decoded token reads (a weight matrix, or the top-k experts' part of one).
struct ReadRange {
  const std::byte* data = nullptr;
  uint64_t bytes = 0;
};

// The decode roofline measured on decode's own access pattern: one pass reads every range in
// order, each split over `pool` in contiguous per-thread parts (one hand-off per range, as
// decode's products), `streams` parts per thread advanced together with software prefetch
// `prefetch_bytes` ahead (0: none), the way decode's kernels stream; nothing is computed.
// Returns the pass's seconds; *bytes_read (optional) gets the bytes it read (each range's whole
// 8-byte words).
double time_read_pass(std::span<const ReadRange> ranges, ThreadPool& pool, int streams, uint64_t prefetch_bytes,
                      uint64_t* bytes_read = nullptr);

}  // namespace g4
