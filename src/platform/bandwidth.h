// Memory-read bandwidth measured by a short streaming loop. Decode reads every weight once per
// token, so tokens/s <= this figure / weight bytes per token: the ceiling `g4 bench` compares to.
#pragma once
#include <cstdint>

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

}  // namespace g4
