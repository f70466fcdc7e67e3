#include "ops/gemm_bf16.h"

#include <algorithm>

#include "platform/device.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass _mm512_undefined_ps() into masked builtins, which -Wuninitialized
// reports at every inlined use (GCC bug 105593, fixed in 13). The values are never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "ops/x86_lanes.h"
#define G4_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
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
G4_BF16_TARGET void tile(const uint16_t* w, int64_t in, const uint16_t* x, int64_t n, float* y, int64_t ldy) {
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

}  // namespace

bool gemm_bf16_available() {
  static const bool ok = host_cpu().avx512_bf16_usable() && host_cpu().isa.avx512bw;
  return ok;
}

G4_BF16_TARGET void round_rows_to_bf16(const float* x, int64_t count, uint16_t* xb) {
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

#else  // not x86-64: never available; callers check first

bool gemm_bf16_available() { return false; }
void round_rows_to_bf16(const float*, int64_t, uint16_t*) {}
void gemm_bf16_rows(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, int64_t, float*, int64_t) {}

#endif

}  // namespace g4::ops
