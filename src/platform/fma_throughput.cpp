#include "platform/fma_throughput.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

#include "platform/amx_tile_config.h"
#include "platform/device.h"
#include "platform/error.h"
#include "platform/threads_together.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "platform/target_attributes.h"
#elif defined(__aarch64__)
#include <arm_neon.h>

#include "platform/target_attributes.h"
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
G4_TARGET_AVX512F double fma_loop_avx512(long iters) {
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

G4_TARGET_AVX2_FMA double fma_loop_avx2(long iters) {
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

// VDPBF16PS (kBf16) or VPDPBUSD: kDotChains independent chains of the instruction on constant
// operands. One target for both: each instantiation runs only where its instruction was confirmed.
// Why 16: a loop holds the unit busy only while chains / latency >= issue rate, and VDPBF16PS's
// latency is longer than an FMA's (12 chains read below what the prefill products reach).
constexpr int kDotChains = 16;
template <bool kBf16>
G4_TARGET_AVX512F_BW_BF16_VNNI double dot_loop(long iters) {
  __m512i acc[kDotChains];
  for (int i = 0; i < kDotChains; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi32(0x3f803f80), b = _mm512_set1_epi32(0x3c003c00);  // bf16 1.0 and 2^-7 pairs
  for (long n = 0; n < iters; ++n) {
    #pragma GCC unroll 16
    for (int i = 0; i < kDotChains; ++i)
      if constexpr (kBf16) acc[i] = (__m512i)_mm512_dpbf16_ps((__m512)acc[i], (__m512bh)a, (__m512bh)b);
      else acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i s = acc[0];
  for (int i = 1; i < kDotChains; ++i) s = _mm512_xor_si512(s, acc[i]);
  alignas(64) int32_t out[16];
  _mm512_store_si512(out, s);
  g_fma_sink.fetch_add(uint64_t(out[0] != 0), std::memory_order_relaxed);
  return double(iters) * kDotChains * (kBf16 ? 64 : 128);
}

// The 256-bit int8 steps (MacUnit::Int8Madd, Int8Dot256): kDotChains chains of the kernels' own
// step on constant operands. The loop body is a macro so that each function is compiled for its
// own instructions only: the AVX2 loop can hold no AVX-VNNI instruction.
#define G4_DOT256_LOOP(STEP)                                                                   \
  __m256i acc[kDotChains];                                                                     \
  for (int i = 0; i < kDotChains; ++i) acc[i] = _mm256_set1_epi32(i);                          \
  const __m256i a = _mm256_set1_epi32(0x0B0C0D0E), b = _mm256_set1_epi32(0x03FD05FB);          \
  for (long n = 0; n < iters; ++n) {                                                           \
    _Pragma("GCC unroll 16") for (int i = 0; i < kDotChains; ++i) acc[i] = STEP;              \
  }                                                                                            \
  __m256i s = acc[0];                                                                          \
  for (int i = 1; i < kDotChains; ++i) s = _mm256_xor_si256(s, acc[i]);                        \
  alignas(32) int32_t out[8];                                                                  \
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), s);                                      \
  g_fma_sink.fetch_add(uint64_t(out[0] != 0), std::memory_order_relaxed);                      \
  return double(iters) * kDotChains * 64;

G4_TARGET_AVX2 double madd256_loop(long iters) {
  const __m256i ones = _mm256_set1_epi16(1);
  // Each chain's bytes feed its own next product (constant operands would be hoisted out of the
  // loop); latency 7 cycles a step on Zen 3 against 16 chains, so the loop runs at issue rate.
  G4_DOT256_LOOP(_mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(acc[i], b), ones)); (void)a)
}

G4_TARGET_AVX2_AVXVNNI double vnni256_loop(long iters) { G4_DOT256_LOOP(_mm256_dpbusd_avx_epi32(acc[i], a, b)) }
#undef G4_DOT256_LOOP

// AMX: four chains of tile products on tiles loaded once, tmm4 and tmm5 x tmm6 and tmm7 into
// tmm0..3, as the kernels' steps run. TDPBF16PS (kInt8 false): 16 x 16 sums of 32 bf16 products,
// on bf16 in [2^-8, 2^-7) with varying mantissas; TDPBSUD (kInt8): the Q8_0/Q4_0 tile kernel's
// shape (gemm_q8_tiles.h: one block of 32 bytes; A 16 x 32 B, B 8 x 64 B), on nonzero bytes. A
// unit may run faster on zeros. Each instantiation runs only where its unit was confirmed.
template <bool kInt8>
G4_TARGET_AMX_BF16_INT8 double amx_loop(long iters) {
  TileConfig config;
  for (int t = 0; t < 4; ++t) config.set(t, kTileRows, kTileRowBytes);
  for (int t = 4; t < 6; ++t) config.set(t, kTileRows, kInt8 ? 32 : kTileRowBytes);
  for (int t = 6; t < 8; ++t) config.set(t, kInt8 ? 8 : kTileRows, kTileRowBytes);
  alignas(64) uint16_t operand[kTileRows * kTileRowBytes / 2];
  for (int i = 0; i < kTileRows * kTileRowBytes / 2; ++i)
    operand[i] = kInt8 ? uint16_t(0x0101 + (i * 37) % 100) : uint16_t(0x3B80 + (i * 37) % 128);
  const long a_stride = kInt8 ? 32 : kTileRowBytes;
  asm volatile("" ::: "memory");
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, a_stride);
  _tile_loadd(5, operand, a_stride);
  _tile_loadd(6, operand, kTileRowBytes);
  _tile_loadd(7, operand, kTileRowBytes);
  for (long n = 0; n < iters; ++n) {
    if constexpr (kInt8) {
      _tile_dpbsud(0, 4, 6);
      _tile_dpbsud(1, 4, 7);
      _tile_dpbsud(2, 5, 6);
      _tile_dpbsud(3, 5, 7);
    } else {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  alignas(64) float out[kTileRows * kTileRows];
  _tile_stored(0, out, kTileRowBytes);
  _tile_release();
  g_fma_sink.fetch_add(uint64_t(out[0] != 0), std::memory_order_relaxed);
  return double(iters) * 4 * kTileRows * kTileRows * 32 * 2;
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

#if defined(__aarch64__)
// NEON FMLA on 4 lanes, twelve chains as on x86.
double fma_loop_neon(long iters) {
  float32x4_t acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = vdupq_n_f32(1.0f + float(i) * 1e-7f);
  const float32x4_t b = vdupq_n_f32(0.9999999f), c = vdupq_n_f32(1e-7f);
  for (long n = 0; n < iters; ++n) {
    #pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = vfmaq_f32(c, acc[i], b);
  }
  float32x4_t s = acc[0];
  for (int i = 1; i < 12; ++i) s = vaddq_f32(s, acc[i]);
  g_fma_sink.fetch_add(uint64_t(vgetq_lane_f32(s, 0) > 0), std::memory_order_relaxed);
  return double(iters) * 12 * 4 * 2;
}

// SDOT on 16 bytes: 16 multiply-adds (32 operations) per instruction, kDotChains-style chains
// whose bytes feed their own next step (constant operands would be hoisted). Runs only where the
// SDOT self-test passed.
G4_TARGET_NEON_DOTPROD double sdot_loop(long iters) {
  constexpr int kChains = 16;
  int32x4_t acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = vdupq_n_s32(0x01020304 + i);
  const int8x16_t b = vdupq_n_s8(3);
  for (long n = 0; n < iters; ++n) {
    #pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = vdotq_s32(acc[i], vreinterpretq_s8_s32(acc[i]), b);
  }
  int32x4_t s = acc[0];
  for (int i = 1; i < kChains; ++i) s = vaddq_s32(s, acc[i]);
  g_fma_sink.fetch_add(uint64_t(vgetq_lane_s32(s, 0) != 0), std::memory_order_relaxed);
  return double(iters) * kChains * 32;
}
#endif

// A loop: runs `iters` iterations, returns the operations done.
using LoopFn = double (*)(long);

// The widest FMA loop this CPU runs, and its name.
LoopFn pick_fma_loop(const char** isa) {
#if defined(__x86_64__)
  const DeviceInfo& d = host_cpu();
  if (d.isa.avx512f && d.os_avx512_state) {
    *isa = "AVX-512";
    return fma_loop_avx512;
  }
  if (d.isa.avx2 && d.isa.fma) {
    *isa = "AVX2+FMA";
    return fma_loop_avx2;
  }
#elif defined(__aarch64__)
  if (host_cpu().isa.neon) {
    *isa = "NEON";
    return fma_loop_neon;
  }
#endif
  *isa = "scalar";
  return fma_loop_scalar;
}

// Iterations that take about pass_seconds on one thread.
long calibrate(LoopFn loop, double pass_seconds) {
  long iters = 1 << 16;
  for (;;) {
    const auto t0 = Clock::now();
    loop(iters);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s >= pass_seconds / 4 || iters > (1L << 40)) return std::max(1L, long(double(iters) * pass_seconds / std::max(s, 1e-9)));
    iters *= 4;
  }
}

// Best of 3 passes of `threads` threads each running `iters` iterations, started together; 1e9 operations/s.
double best_gops(LoopFn loop, int threads, long iters) {
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<double> ops(static_cast<size_t>(threads), 0.0);
    const double s = time_threads_together(threads, [&](int t) { ops[size_t(t)] = loop(iters); });
    double total = 0;
    for (double f : ops) total += f;
    best = std::max(best, total / std::max(s, 1e-9) / 1e9);
  }
  return best;
}

void check_arguments(const char* what, int threads, double pass_seconds) {
  if (threads < 1) throw Error(std::string(what) + ": threads must be >= 1, got " + std::to_string(threads));
  if (!(pass_seconds > 0 && pass_seconds <= 10))
    throw Error(std::string(what) + ": pass_seconds must be in (0, 10], got " + std::to_string(pass_seconds));
}

}  // namespace

FmaScaling measure_fma_scaling(int threads, double pass_seconds) {
  check_arguments("FMA throughput", threads, pass_seconds);
  const auto started = Clock::now();
  FmaScaling r;
  const LoopFn loop = pick_fma_loop(&r.isa);
  const long iters = calibrate(loop, pass_seconds);
  r.threads = threads;
  r.one_thread_gflops = best_gops(loop, 1, iters);
  r.all_threads_gflops = threads == 1 ? r.one_thread_gflops : best_gops(loop, threads, iters);
  r.seconds_total = std::chrono::duration<double>(Clock::now() - started).count();
  return r;
}

const char* mac_unit_name(MacUnit u) {
  switch (u) {
    case MacUnit::F32Fma: return "f32 FMA";
    case MacUnit::Bf16Dot: return "VDPBF16PS";
    case MacUnit::Int8Dot: return "VPDPBUSD";
    case MacUnit::Bf16Tile: return "TDPBF16PS";
    case MacUnit::Int8Tile: return "TDPBSUD";
    case MacUnit::Int8Madd: return "VPMADDUBSW+VPMADDWD";
    case MacUnit::Int8Dot256: return "VPDPBUSD (AVX-VNNI)";
    case MacUnit::Int8Sdot: return "SDOT";
  }
  return "?";
}

int mac_unit_operations(MacUnit u) {
  switch (u) {
    case MacUnit::F32Fma: return 32;
    case MacUnit::Bf16Dot: return 64;
    case MacUnit::Int8Dot: return 128;
    case MacUnit::Bf16Tile: return kTileRows * kTileRows * 32 * 2;
    case MacUnit::Int8Tile: return kTileRows * kTileRows * 32 * 2;
    case MacUnit::Int8Madd: return 64;
    case MacUnit::Int8Dot256: return 64;
    case MacUnit::Int8Sdot: return 32;
  }
  return 0;
}

MacPeak measure_mac_peak(MacUnit unit, int threads, double pass_seconds) {
  check_arguments("multiply-add peak", threads, pass_seconds);
  const char* isa = "";
  LoopFn loop = pick_fma_loop(&isa);
  if (unit != MacUnit::F32Fma) {
    const DeviceInfo& d = host_cpu();
    const bool confirmed = unit == MacUnit::Bf16Dot   ? d.avx512_bf16_usable()
                           : unit == MacUnit::Bf16Tile ? d.amx_bf16_usable()
                           : unit == MacUnit::Int8Tile ? d.amx_int8_usable()
                           : unit == MacUnit::Int8Madd ? d.avx2_int8_usable()
                           : unit == MacUnit::Int8Dot256 ? d.avx_vnni_usable()
                           : unit == MacUnit::Int8Sdot   ? d.neon_dotprod_usable()
                                                       : d.avx512_vnni_usable();
    if (!confirmed)
      throw Error(std::string("multiply-add peak: this CPU has no confirmed ") + mac_unit_name(unit) +
                  " (probe and self-test: g4 device)");
#if defined(__x86_64__)
    loop = unit == MacUnit::Bf16Dot    ? dot_loop<true>
           : unit == MacUnit::Bf16Tile ? amx_loop<false>
           : unit == MacUnit::Int8Tile ? amx_loop<true>
           : unit == MacUnit::Int8Madd ? madd256_loop
           : unit == MacUnit::Int8Dot256 ? vnni256_loop
                                       : dot_loop<false>;
#elif defined(__aarch64__)
    if (unit == MacUnit::Int8Sdot) loop = sdot_loop;
#endif
  }
  MacPeak r;
  r.unit = unit;
  r.threads = threads;
  r.gops = best_gops(loop, threads, calibrate(loop, pass_seconds));
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
