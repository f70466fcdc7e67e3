#include "ops/matmul/gemm_bf16.h"

#include <algorithm>
#include <string>

#include "ops/matmul/gemm_q8.h"
#include "platform/device.h"
#include "platform/error.h"
#include "platform/row_interleave.h"

#if defined(__x86_64__)
#include "platform/avx512_intrinsics.h"
#include "platform/target_attributes.h"

#include "ops/isa/x86_lanes.h"
#endif

namespace g4::ops {

#if defined(__x86_64__)
namespace {

// Tokens per block: the block's activations ([kTokenBlock, in] bf16, 768 KiB at in = 6144)
// stay in L2 while every row group of this thread streams past them.
constexpr int64_t kTokenBlock = 64;

// R weight rows x C tokens: R·C accumulators of 16 f32 lanes, each fed 32 bf16 products per
// step. Every variant performs the same per-(row, token) operations in the same order.
template <int R, int C>
G4_TARGET_AVX512F_BW_VL_BF16 void tile(const uint16_t* w, int64_t in, const uint16_t* x, int64_t n, float* y,
                                       int64_t ldy) {
  __m512 acc[R][C];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    __m512i wv[R], xv[C];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) wv[r] = _mm512_loadu_si512(w + r * in + k);
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) xv[c] = _mm512_loadu_si512(x + c * in + k);
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], (__m512bh)wv[r], (__m512bh)xv[c]);
  }
  if (k < n) {  // zero-filled tail: the missing pairs add 0·0
    const __mmask32 m = __mmask32((uint64_t(1) << (n - k)) - 1);
    __m512i wv[R], xv[C];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) wv[r] = _mm512_maskz_loadu_epi16(m, w + r * in + k);
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) xv[c] = _mm512_maskz_loadu_epi16(m, x + c * in + k);
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], (__m512bh)wv[r], (__m512bh)xv[c]);
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) y[c * ldy + r] = x86::lane_sum(acc[r][c]);
}

using TileFn = void (*)(const uint16_t*, int64_t, const uint16_t*, int64_t, float*, int64_t);

template <int R>
constexpr TileFn tile_for(int c) {
  return c == 1 ? tile<R, 1> : c == 2 ? tile<R, 2> : c == 3 ? tile<R, 3> : tile<R, 4>;
}

TileFn pick(int r, int c) {
  switch (r) {
    case 1: return tile_for<1>(c);
    case 2: return tile_for<2>(c);
    case 3: return tile_for<3>(c);
    default: return tile_for<4>(c);
  }
}

// Decode on BF16_R16: G groups (group_values bf16 apart) side by side, one accumulator each,
// lane r = row r; y[16g + r]. Each step reads one 64-byte line per group; with prefetch > 0 each
// group's stream also requests the line `prefetch` bytes ahead, past its group's end in the group
// it reads next (G on), as the int8 kernels do (DecodeStreaming::prefetch_bytes).
template <int G>
G4_TARGET_AVX512F_BW_VL_BF16 void decode_groups(const uint16_t* w, uint64_t group_values, int64_t pairs,
                                                const uint16_t* x, float* y, uint64_t prefetch) {
  __m512 acc[G];
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  const uint64_t group_bytes = 2 * group_values;
  const char* base = reinterpret_cast<const char*>(w);
  for (int64_t p = 0; p < pairs; ++p) {
    if (prefetch) {
      const uint64_t ahead = stream_prefetch_offset(uint64_t(p) * 64 + prefetch, group_bytes, G);
      #pragma GCC unroll 4
      for (int g = 0; g < G; ++g) _mm_prefetch(base + uint64_t(g) * group_bytes + ahead, _MM_HINT_T0);
    }
    const __m512bh xp = (__m512bh)_mm512_set1_epi32(x86::load_i32(x + 2 * p));
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
      acc[g] = _mm512_dpbf16_ps(acc[g], (__m512bh)_mm512_loadu_si512(w + g * group_values + 32 * p), xp);
  }
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) _mm512_storeu_ps(y + 16 * g, acc[g]);
}

// Prefill on BF16_R16: G groups x kPanel tokens (x: token rows of `in` values), the first
// `count` tokens stored to y[t · ldy + 16g + r]. Tokens past `count` re-read the last one, so
// the loop never leaves the activations; their sums are dropped.
constexpr int kPanel = 8;
template <int G>
G4_TARGET_AVX512F_BW_VL_BF16 void prefill_panel(const uint16_t* w, uint64_t group_values, int64_t in, const uint16_t* x,
                                                int count, float* y, int64_t ldy) {
  const uint16_t* xt[kPanel];
  for (int t = 0; t < kPanel; ++t) xt[t] = x + std::min(t, count - 1) * in;
  __m512 acc[G][kPanel];
  x86::zero_tile(acc);
  for (int64_t p = 0; p < in / 2; ++p) {
    __m512bh wv[G];
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g) wv[g] = (__m512bh)_mm512_loadu_si512(w + g * group_values + 32 * p);
    #pragma GCC unroll 8
    for (int t = 0; t < kPanel; ++t) {
      const __m512bh xp = (__m512bh)_mm512_set1_epi32(x86::load_i32(xt[t] + 2 * p));
      #pragma GCC unroll 4
      for (int g = 0; g < G; ++g) acc[g][t] = _mm512_dpbf16_ps(acc[g][t], wv[g], xp);
    }
  }
  x86::store_group_panel(acc, y, ldy, count);
}

}  // namespace

bool gemm_bf16_available() {
  static const bool ok = host_cpu().avx512_bf16_usable() && host_cpu().isa.avx512bw;
  return ok;
}

G4_TARGET_AVX512F_BW_VL_BF16 void round_rows_to_bf16(const float* x, int64_t count, uint16_t* xb) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(xb + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
  if (i < count) {  // same instruction on a masked tail, so every element rounds the same way
    const __mmask16 m = __mmask16((1u << (count - i)) - 1);
    _mm256_mask_storeu_epi16(xb + i, m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

void gemm_bf16_rows(const uint16_t* xb, int64_t T, int64_t in, const uint16_t* w, int64_t o_begin, int64_t o_end,
                    float* y, int64_t ldy) {
  for (int64_t t0 = 0; t0 < T; t0 += kTokenBlock) {
    const int64_t t1 = std::min(T, t0 + kTokenBlock);
    for (int64_t o = o_begin; o < o_end; o += 4) {
      const int r = int(std::min<int64_t>(4, o_end - o));
      for (int64_t t = t0; t < t1; t += 4) {
        const int c = int(std::min<int64_t>(4, t1 - t));
        pick(r, c)(w + o * in, in, xb + t * in, in, y + t * ldy + o, ldy);
      }
    }
  }
}

void gemm_bf16_interleaved_rows(const uint16_t* xb, int64_t T, int64_t in, const std::byte* w, int64_t o_begin,
                                int64_t o_end, float* y, int64_t ldy, int side_by_side, uint64_t prefetch_bytes) {
  if (in % 2 || o_begin % kInterleaveRows || o_end % kInterleaveRows)
    throw Error("gemm_bf16_interleaved_rows: BF16_R16 needs an even width and rows in whole groups of 16, got width " +
                std::to_string(in) + ", rows [" + std::to_string(o_begin) + ", " + std::to_string(o_end) + ")");
  const uint64_t group_values = uint64_t(kInterleaveRows) * uint64_t(in);
  const uint16_t* wv = reinterpret_cast<const uint16_t*>(w);
  // Prefill: a block of 64 tokens meets each pair of groups (2 x 16 rows x in bf16: 96 KiB at
  // in = 1536, 384 KiB at 6144) while it sits in L2. The tile is compute-bound, so blocks of 32
  // to 512 tokens ran about as fast.
  constexpr int64_t kInterleavedTokenBlock = 8 * kPanel;
  walk_interleaved_groups(
      T, o_begin / kInterleaveRows, o_end / kInterleaveRows, side_by_side,
      [&](int n, int64_t g) {
        auto run = n == 4 ? decode_groups<4> : n == 2 ? decode_groups<2> : decode_groups<1>;
        run(wv + uint64_t(g) * group_values, group_values, in / 2, xb, y + kInterleaveRows * g, prefetch_bytes);
      },
      [&](bool pair, int64_t g, int64_t t, int count) {
        auto run = pair ? prefill_panel<2> : prefill_panel<1>;
        run(wv + uint64_t(g) * group_values, group_values, in, xb + t * in, count, y + t * ldy + kInterleaveRows * g, ldy);
      },
      kPanel, kInterleavedTokenBlock);
}

#else  // not x86-64: never available; callers check first

bool gemm_bf16_available() { return false; }
void round_rows_to_bf16(const float*, int64_t, uint16_t*) {}
void gemm_bf16_rows(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, int64_t, float*, int64_t) {}
void gemm_bf16_interleaved_rows(const uint16_t*, int64_t, int64_t, const std::byte*, int64_t, int64_t, float*, int64_t,
                                int, uint64_t) {}

#endif

}  // namespace g4::ops
