#include "ops/matmul/gemm_bf16_256.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "ops/matmul/gemm_q8.h"  // walk_interleaved_groups, stream_prefetch_offset
#include "platform/device.h"
#include "platform/error.h"
#include "platform/row_interleave.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "platform/target_attributes.h"
#endif

namespace g4::ops {

namespace {

// force_gemm_bf16_256: 0 unset, 1 on, 2 off.
std::atomic<uint8_t> forced{0};

}  // namespace

bool gemm_bf16_256_supported() {
#if defined(__x86_64__)
  static const bool ok = host_cpu().isa.avx2 && host_cpu().isa.fma && host_cpu().isa.f16c;
  return ok;
#else
  return false;
#endif
}

bool gemm_bf16_256_available() {
  const uint8_t f = forced.load(std::memory_order_relaxed);
  if (f) return f == 1;
  static const bool by_default = gemm_bf16_256_supported() && !host_cpu().avx512_usable();
  return by_default;
}

void force_gemm_bf16_256(std::optional<bool> on) {
  if (on.value_or(false) && !gemm_bf16_256_supported())
    throw Error("force_gemm_bf16_256: this CPU did not confirm AVX2, FMA and F16C");
  forced.store(on ? (*on ? 1 : 2) : 0, std::memory_order_relaxed);
}

#if defined(__x86_64__)
namespace {

// The two halves of one row's sums, as VHADDPS adds them: lane 2k + 1 onto lane 2k.
struct Widened {
  __m256 lo;  // [r0e r0o r1e r1o | r4e r4o r5e r5o]
  __m256 hi;  // [r2e r2o r3e r3o | r6e r6o r7e r7o]
};

// The 32-byte half at p (8 rows x one value pair) in f32: each bf16 word unpacked above a zero
// word is that value's f32, exactly. The unpacks stay within each 128-bit lane (see Widened).
G4_TARGET_AVX2_FMA inline Widened widen(const std::byte* p, __m256i zero) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return {_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, h)), _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, h))};
}

// (x[0], x[1]) in every pair of lanes: one 64-bit broadcast.
G4_TARGET_AVX2_FMA inline __m256 pair_at(const float* x) {
  double d;
  std::memcpy(&d, x, sizeof d);
  return _mm256_castpd_ps(_mm256_set1_pd(d));
}

// Rows 0-7 in order, each even chain + odd chain: VHADDPS of the two accumulators adds lanes
// (2k, 2k + 1) of lo then of hi within each 128-bit lane: [r0 r1 r2 r3 | r4 r5 r6 r7].
G4_TARGET_AVX2_FMA inline __m256 finish(__m256 lo, __m256 hi) { return _mm256_hadd_ps(lo, hi); }

// Decode: G groups (group_bytes apart) x the one token, both halves of each, 4 accumulators a
// group; y[16g + r]. With prefetch > 0 each group's stream requests the line `prefetch` bytes
// ahead, past its group's end in the group it reads next (G on), as the int8 kernels do.
template <int G>
G4_TARGET_AVX2_FMA void decode_groups(const std::byte* w, uint64_t group_bytes, int64_t pairs, const float* x, float* y,
                                      uint64_t prefetch) {
  const __m256i zero = _mm256_setzero_si256();
  __m256 acc[G][2][2];
  #pragma GCC unroll 2
  for (int g = 0; g < G; ++g)
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) acc[g][h][0] = acc[g][h][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    if (prefetch) {
      const uint64_t ahead = stream_prefetch_offset(uint64_t(p) * 64 + prefetch, group_bytes, G);
      #pragma GCC unroll 2
      for (int g = 0; g < G; ++g) _mm_prefetch(reinterpret_cast<const char*>(w + uint64_t(g) * group_bytes + ahead), _MM_HINT_T0);
    }
    const __m256 xp = pair_at(x + 2 * p);
    #pragma GCC unroll 2
    for (int g = 0; g < G; ++g)
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const Widened v = widen(w + uint64_t(g) * group_bytes + 64 * uint64_t(p) + 32 * h, zero);
        acc[g][h][0] = _mm256_fmadd_ps(v.lo, xp, acc[g][h][0]);
        acc[g][h][1] = _mm256_fmadd_ps(v.hi, xp, acc[g][h][1]);
      }
  }
  #pragma GCC unroll 2
  for (int g = 0; g < G; ++g)
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + 16 * g + 8 * h, finish(acc[g][h][0], acc[g][h][1]));
}

// Prefill tile: one 8-row half (`half`: its first 32 bytes, vectors 64 bytes apart) x C tokens
// (rows of `in` f32 from x), 2 accumulators a token: 2C + the two widened registers, the pair and
// zero fit the 16 ymm registers for C <= 6. y[c · ldy + r] for row r of the half.
template <int C>
G4_TARGET_AVX2_FMA void half_tile(const std::byte* half, int64_t pairs, const float* x, int64_t in, float* y, int64_t ldy) {
  const __m256i zero = _mm256_setzero_si256();
  const float* xt[C];
  __m256 acc[C][2];
  #pragma GCC unroll 6
  for (int c = 0; c < C; ++c) {
    xt[c] = x + c * in;
    acc[c][0] = acc[c][1] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < pairs; ++p) {
    const Widened v = widen(half + 64 * p, zero);
    #pragma GCC unroll 6
    for (int c = 0; c < C; ++c) {
      const __m256 xp = pair_at(xt[c] + 2 * p);
      acc[c][0] = _mm256_fmadd_ps(v.lo, xp, acc[c][0]);
      acc[c][1] = _mm256_fmadd_ps(v.hi, xp, acc[c][1]);
    }
  }
  #pragma GCC unroll 6
  for (int c = 0; c < C; ++c) _mm256_storeu_ps(y + c * ldy, finish(acc[c][0], acc[c][1]));
}

using HalfTileFn = void (*)(const std::byte*, int64_t, const float*, int64_t, float*, int64_t);
constexpr HalfTileFn kHalfTiles[kBf16Tile256Tokens] = {half_tile<1>, half_tile<2>, half_tile<3>,
                                                       half_tile<4>, half_tile<5>, half_tile<6>};

// Tokens per prefill block: the block's activations (96 x in f32: 576 KiB at in = 1536, 4.5 MiB
// at 12288) come from L2 or L3 while each pair of groups passes, and the weights are read once
// per 96 tokens. On a 2-vCPU Zen 3, 1 thread, 64 tokens through twelve [1536, 6144] matrices
// (BM_MatmulBF16_R16/0/1/64/1): blocks holding 256 KiB of activations (6 tokens at that width)
// 351 tok/s, 1 MiB 386, 96 tokens 411.
constexpr int64_t kTokenBlock = 16 * kBf16Tile256Tokens;

}  // namespace

void gemm_bf16_256_rows(const float* x, int64_t T, int64_t in, const std::byte* w, int64_t o_begin, int64_t o_end,
                        float* y, int64_t ldy, int side_by_side, uint64_t prefetch_bytes) {
  if (in % 2 || o_begin % kInterleaveRows || o_end % kInterleaveRows)
    throw Error("gemm_bf16_256_rows: BF16_R16 needs an even width and rows in whole groups of 16, got width " +
                std::to_string(in) + ", rows [" + std::to_string(o_begin) + ", " + std::to_string(o_end) + ")");
  const uint64_t group_bytes = uint64_t(kInterleaveRows) * uint64_t(in) * 2;
  walk_interleaved_groups(
      T, o_begin / kInterleaveRows, o_end / kInterleaveRows, std::min(side_by_side, kBf16Decode256Groups),
      [&](int n, int64_t g) {
        auto run = n == 2 ? decode_groups<2> : decode_groups<1>;
        run(w + uint64_t(g) * group_bytes, group_bytes, in / 2, x, y + kInterleaveRows * g, prefetch_bytes);
      },
      [&](bool pair, int64_t g, int64_t t, int count) {
        for (int64_t gi = g; gi < g + (pair ? 2 : 1); ++gi)
          for (int h = 0; h < 2; ++h)
            kHalfTiles[count - 1](w + uint64_t(gi) * group_bytes + 32 * h, in / 2, x + t * in, in,
                                  y + t * ldy + kInterleaveRows * gi + 8 * h, ldy);
      },
      kBf16Tile256Tokens, kTokenBlock);
}

#else  // not x86-64: never supported; callers check first

void gemm_bf16_256_rows(const float*, int64_t, int64_t, const std::byte*, int64_t, int64_t, float*, int64_t, int,
                        uint64_t) {
  throw Error("gemm_bf16_256_rows: not an x86-64 build");
}

#endif

}  // namespace g4::ops
