// Small AVX-512 helpers shared by the raw-intrinsics kernels (gemm_bf16, gemm_q8). Internal to
// the ops layer; include only from translation units compiled for x86-64.
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

namespace g4::ops::x86 {

// Sum of 16 lanes in a fixed order, so every caller reduces identically (GCC 12's
// _mm512_reduce_add_ps trips -Wuninitialized).
__attribute__((target("avx512f"))) inline float lane_sum(__m512 v) {
  __m512 s = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm512_add_ps(s, _mm512_shuffle_f32x4(s, s, _MM_SHUFFLE(2, 3, 0, 1)));
  s = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_cvtss_f32(s);
}

}  // namespace g4::ops::x86
#endif
