// Small AVX-512 helpers shared by the raw-intrinsics kernels (gemm_bf16, gemm_q8, gemm_kquant,
// gemm_kquant_interleaved, attention_bf16, attention_int8). Internal to the ops layer; include
// only from translation units compiled for x86-64.
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "platform/target_attributes.h"

namespace g4::ops::x86 {

// 4 bytes as one int32 (any alignment), for a broadcast: 4 int8 activations (VPDPBUSD) or a
// pair of bf16 ones (VDPBF16PS).
inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Sum of 16 lanes in a fixed order, so every caller reduces identically (GCC 12's
// _mm512_reduce_add_ps trips -Wuninitialized).
G4_TARGET_AVX512F inline float lane_sum(__m512 v) {
  __m512 s = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm512_add_ps(s, _mm512_shuffle_f32x4(s, s, _MM_SHUFFLE(2, 3, 0, 1)));
  s = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_cvtss_f32(s);
}

// Every accumulator of an R x C tile set to zero.
template <int R, int C>
G4_TARGET_AVX512F inline void zero_tile(__m512 (&acc)[R][C]) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
}

// y[c · ldy + r] = the lane sum of acc[r][c]: the store at the end of an R rows x C tokens tile.
template <int R, int C>
G4_TARGET_AVX512F inline void store_tile_sums(const __m512 (&acc)[R][C], float* y, long ldy) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) y[c * ldy + r] = lane_sum(acc[r][c]);
}

// The interleaved prefill tiles' store: acc[g][c] (16 rows of group g, token c) to
// y[c · ldy + 16g ..], for the first `count` tokens of the panel.
template <int G, int C>
G4_TARGET_AVX512F inline void store_group_panel(const __m512 (&acc)[G][C], float* y, long ldy, int count) {
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g)
    #pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      if (c < count) _mm512_storeu_ps(y + c * ldy + 16 * g, acc[g][c]);
}

// out lane j = the sum of the 16 lanes of a[j], by one fixed tree for every j: pairs of elements
// within 128-bit lanes, then pairs of pairs, then the four 128-bit lanes ((l0 + l1) + (l2 + l3)).
// 45 operations instead of 16 separate reductions. kInt32: the lanes hold int32 (exact sums),
// otherwise f32; the shuffles move bits either way.
template <bool kInt32>
G4_TARGET_AVX512F inline __m512 add_lanes(__m512 x, __m512 y) {
  if constexpr (kInt32) return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(x), _mm512_castps_si512(y)));
  else return _mm512_add_ps(x, y);
}

template <bool kInt32>
G4_TARGET_AVX512F inline __m512 sum16_lanes(const __m512* a) {
  __m512 x[8], y[4];
  #pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    x[i] = add_lanes<kInt32>(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  #pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d p = _mm512_castps_pd(x[2 * i]), q = _mm512_castps_pd(x[2 * i + 1]);
    y[i] = add_lanes<kInt32>(_mm512_castpd_ps(_mm512_unpacklo_pd(p, q)), _mm512_castpd_ps(_mm512_unpackhi_pd(p, q)));
  }
  // y[i] lanes: 128-bit lane k holds partial sums of a[4i .. 4i + 3] over their lane k.
  const __m512 w0 = add_lanes<kInt32>(_mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 w1 = add_lanes<kInt32>(_mm512_shuffle_f32x4(y[2], y[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm512_shuffle_f32x4(y[2], y[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return add_lanes<kInt32>(_mm512_shuffle_f32x4(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)));
}

}  // namespace g4::ops::x86
#endif
