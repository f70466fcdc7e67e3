#include "platform/fma_throughput.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

#include "platform/device.h"
#include "platform/error.h"
#include "platform/threads_together.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace g4 {
namespace {

using Clock = std::chrono::steady_clock;

// Every loop folds its result into this, so the compiler keeps the work.
std::atomic<uint64_t> g_fma_sink{0};

// Twelve independent chains: enough to cover the FMA latency on two ports (4 cycles x 2 ports =
// 8 in flight), so the loop runs at the units' issue rate. Each call does `iters` x 12 FMAs on
// `Lanes` floats; returns the flops done.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) double fma_loop_avx512(long iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(1.0f + float(i) * 1e-7f);
  const __m512 b = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
  for (long n = 0; n < iters; ++n) {
    #pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], b, c);
  }
  alignas(64) float out[16];
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  _mm512_store_ps(out, s);
  g_fma_sink.fetch_add(uint64_t(out[0] > 0), std::memory_order_relaxed);
  return double(iters) * 12 * 16 * 2;
}

__attribute__((target("avx2,fma"))) double fma_loop_avx2(long iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(1.0f + float(i) * 1e-7f);
  const __m256 b = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
  for (long n = 0; n < iters; ++n) {
    #pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], b, c);
  }
  alignas(32) float out[8];
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_store_ps(out, s);
  g_fma_sink.fetch_add(uint64_t(out[0] > 0), std::memory_order_relaxed);
  return double(iters) * 12 * 8 * 2;
}
#endif

double fma_loop_scalar(long iters) {
  float acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = 1.0f + float(i) * 1e-7f;
  for (long n = 0; n < iters; ++n)
    for (float& a : acc) a = a * 0.9999999f + 1e-7f;
  float s = 0;
  for (float a : acc) s += a;
  g_fma_sink.fetch_add(uint64_t(s > 0), std::memory_order_relaxed);
  return double(iters) * 12 * 2;
}

enum class Loop { Avx512, Avx2, Scalar };

Loop pick_loop() {
#if defined(__x86_64__)
  const DeviceInfo& d = host_cpu();
  if (d.isa.avx512f && d.os_avx512_state) return Loop::Avx512;
  if (d.isa.avx2 && d.isa.fma) return Loop::Avx2;
#endif
  return Loop::Scalar;
}

double run_loop(Loop loop, long iters) {
#if defined(__x86_64__)
  if (loop == Loop::Avx512) return fma_loop_avx512(iters);
  if (loop == Loop::Avx2) return fma_loop_avx2(iters);
#endif
  return fma_loop_scalar(iters);
}

// Best of 3 passes of `threads` threads each running `iters` iterations, started together; GFLOP/s.
double best_gflops(Loop loop, int threads, long iters) {
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<double> flops(static_cast<size_t>(threads), 0.0);
    const double s = time_threads_together(threads, [&](int t) { flops[size_t(t)] = run_loop(loop, iters); });
    double total = 0;
    for (double f : flops) total += f;
    best = std::max(best, total / std::max(s, 1e-9) / 1e9);
  }
  return best;
}

}  // namespace

FmaScaling measure_fma_scaling(int threads, double pass_seconds) {
  if (threads < 1) throw Error("FMA throughput: threads must be >= 1, got " + std::to_string(threads));
  if (!(pass_seconds > 0 && pass_seconds <= 10))
    throw Error("FMA throughput: pass_seconds must be in (0, 10], got " + std::to_string(pass_seconds));
  const auto started = Clock::now();
  const Loop loop = pick_loop();
  // Calibrate: iterations that take about pass_seconds on one thread.
  long iters = 1 << 16;
  for (;;) {
    const auto t0 = Clock::now();
    run_loop(loop, iters);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s >= pass_seconds / 4 || iters > (1L << 40)) {
      iters = long(double(iters) * pass_seconds / std::max(s, 1e-9));
      break;
    }
    iters *= 4;
  }
  iters = std::max(iters, 1L);
  FmaScaling r;
  r.threads = threads;
  r.isa = loop == Loop::Avx512 ? "AVX-512" : loop == Loop::Avx2 ? "AVX2+FMA" : "scalar";
  r.one_thread_gflops = best_gflops(loop, 1, iters);
  r.all_threads_gflops = threads == 1 ? r.one_thread_gflops : best_gflops(loop, threads, iters);
  r.seconds_total = std::chrono::duration<double>(Clock::now() - started).count();
  return r;
}

double fma_cores_worth(const FmaScaling& s) {
  return s.one_thread_gflops > 0 ? s.all_threads_gflops / s.one_thread_gflops : 0.0;
}

std::string describe_fma_scaling(const FmaScaling& s) {
  char buf[512];
  const double worth = fma_cores_worth(s);
  std::snprintf(buf, sizeof buf, "%.0f GFLOP/s on 1 thread, %.0f on %d together (%.2fx; %s loop)", s.one_thread_gflops,
                s.all_threads_gflops, s.threads, worth, s.isa);
  std::string out = buf;
  if (s.threads <= 1 || worth <= 0) return out;
  if (worth >= 0.75 * s.threads) return out + ": the threads' multiply-adds scale with their number";
  std::snprintf(buf, sizeof buf,
                ": %d threads get %.1f cores' worth of multiply-adds, so they share FMA units (hyperthreads of "
                "one core, whatever the OS reports, or a busy host): compute-bound work (prefill, attention at "
                "depth) gains at most %.2fx from them, memory-bound decode still gains",
                s.threads, worth, worth);
  return out + buf;
}

}  // namespace g4
