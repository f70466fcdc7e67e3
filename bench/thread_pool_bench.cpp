// The pool's hand-off: one parallel_for or parallel_chunks round trip (wake the workers, run
// nothing, join) on 2 threads. Decode pays it a few hundred times per token (each layer's
// products, its attention and its PLE products are separate hand-offs), so this is the
// overhead that a memory-bound step adds per hand-off; reported as microseconds per round trip.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>

#include "platform/thread_pool.h"

namespace g4 {
namespace {

// state.range(0): 0 parallel_for(threads), 1 parallel_chunks(64 units, chunk 8); range(1): the
// serial work between hand-offs in nanoseconds of spinning (0 or 20000: a layer's serial part).
void BM_PoolHandOff(benchmark::State& state) {
  ThreadPool pool(2);
  const bool chunks = state.range(0) == 1;
  const int64_t gap_ns = state.range(1);
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    if (chunks)
      pool.parallel_chunks(64, 8, [&](int64_t b, int64_t e, int) { sink.fetch_add(e - b, std::memory_order_relaxed); });
    else
      pool.parallel_for(2, [&](int64_t b, int64_t e, int) { sink.fetch_add(e - b, std::memory_order_relaxed); });
    if (gap_ns > 0) {
      state.PauseTiming();
      const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(gap_ns);
      while (std::chrono::steady_clock::now() < until) {
      }
      state.ResumeTiming();
    }
  }
  benchmark::DoNotOptimize(sink.load());
}
BENCHMARK(BM_PoolHandOff)->ArgsProduct({{0, 1}, {0, 20000}})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace g4
